"""One contract, every backend: the same report shape, and numbers that agree with the simulation.

- emulated: the simulation read in-process;
- sysfs: the same simulation written as a driver tree (the emulator's writer), read back through
  the sysfs backend, with a real process holding a device as the application.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from neuron_monitor.backends.base import REPORTED_CORE_MEMORY, DeviceBackend, Need
from neuron_monitor.backends.emulated import EmulatedBackend
from neuron_monitor.backends.scenario import parse_scenario
from neuron_monitor.backends.simulation import Simulation
from neuron_monitor.backends.sysfs import SysfsBackend
from neuron_monitor.catalogue import instance_type
from neuron_monitor.config import default_config
from neuron_monitor.emulator.tree_writer import TreeWriter
from neuron_monitor.report import RUNTIME_GROUPS, SYSTEM_GROUPS, InstanceInfo, Report
from neuron_monitor.scheduler import Scheduler
from neuron_monitor.selfstats import DaemonStats
from tests.report_checks import check_report

ALL = frozenset(Need)
SCENARIO = parse_scenario({"applications": [{"tag": "contract-app", "device": 0}]})


@dataclass
class Subject:
    backend: DeviceBackend
    sim: Simulation
    advance: Any  # callable(t): move the simulation (and the files) to emulated time t


@pytest.fixture(params=["emulated", "sysfs"])
def subject(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Subject]:
    instance = request.node.callspec.params.get("instance", "trn1.2xlarge")
    if request.param == "emulated":
        emulated = EmulatedBackend(instance, seed=5, scenario=SCENARIO, clock=lambda: 0.0)
        yield Subject(emulated, emulated.simulation, lambda t: None)
        return
    sim = Simulation(instance_type(instance), SCENARIO, seed=5, start=0.0)
    writer = TreeWriter(str(tmp_path), sim)
    writer.create()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys,time; f=open(sys.argv[1]); time.sleep(60)", str(tmp_path / "dev/neuron0")],
        env={**os.environ, "NEURON_PROCESS_TAG": "contract-app"})
    sysfs = SysfsBackend(str(tmp_path / "sys"), "/proc", str(tmp_path / "dev"))
    deadline = time.monotonic() + 10
    while not sysfs.snapshot(frozenset({Need.APPLICATIONS}), 0.0).applications and time.monotonic() < deadline:
        time.sleep(0.05)

    def advance(t: float) -> None:
        sim.advance_to(t)
        writer.update()

    try:
        yield Subject(sysfs, sim, advance)
    finally:
        holder.kill()
        holder.wait()
        sysfs.close()
        writer.close()


@pytest.mark.parametrize("instance", ["trn1.2xlarge", "inf1.xlarge", "inf2.xlarge", "trn2.48xlarge"])
def test_counters_agree_with_the_simulation(subject: Subject, instance: str) -> None:
    subject.advance(30.0)
    snap = subject.backend.snapshot(ALL, 30.0)
    sim = subject.sim
    assert snap.cores is not None and snap.devices is not None and snap.applications is not None
    present = {c for c in snap.cores}
    for core in sim.cores:
        if core.core not in present:
            continue  # sysfs: only what the tree holds
        got = snap.cores[core.core]
        assert (got.busy_us, got.flops) == (core.busy_us, core.flops)
        assert dict(got.status) == core.status
        # Only the categories the report has are read (REPORTED_CORE_MEMORY).
        assert dict(got.device_memory) == {k: core.device_memory[k] for k in REPORTED_CORE_MEMORY}
    assert present  # at least device 0
    for device in snap.devices:
        want = sim.devices[device.device]
        assert device.mem_ecc_uncorrected == (want.ecc["mem_ecc_uncorrected"] if sim.arch.has_hardware_stats else 0)
    hw = subject.backend.hardware()
    assert hw.device_type == sim.arch.neuron_device_type
    assert hw.physical_cores_per_device == sim.arch.physical_cores_per_device
    apps = [a for a in snap.applications if a.tag == "contract-app"]
    assert len(apps) == 1
    per_device = hw.logical_cores_per_device
    assert apps[0].cores == tuple(range(per_device))


def test_scheduler_reports_have_the_same_shape(subject: Subject) -> None:
    class Clock:
        t = 0.0

        def now(self) -> float:
            return self.t

        async def sleep_until(self, deadline: float, wake: asyncio.Event) -> None:
            self.t = max(self.t, deadline)
            subject.advance(self.t)

    reports: list[Report] = []
    clock = Clock()

    async def offload(func: Any, *args: Any) -> Any:
        return func(*args)

    scheduler = Scheduler(subject.backend, default_config(1.0), reports.append, DaemonStats(), InstanceInfo(),
                          clock=clock, offload=offload)
    stop = asyncio.Event()

    async def run() -> None:
        task = asyncio.create_task(scheduler.run(stop))
        while len(reports) < 4:
            await asyncio.sleep(0)
        stop.set()
        await task

    asyncio.run(run())
    data = reports[-1].model_dump(mode="json")
    check_report(data, set(RUNTIME_GROUPS), set(SYSTEM_GROUPS))
    mine = [e for e in data["neuron_runtime_data"] if e["neuron_runtime_tag"] == "contract-app"]
    assert len(mine) == 1
    stats = mine[0]["report"]["execution_stats"]
    assert stats["execution_summary"]["completed"] > 0
    util = mine[0]["report"]["neuroncore_counters"]["neuroncores_in_use"]["0"]["neuroncore_utilization"]
    assert 0 < util <= 100
