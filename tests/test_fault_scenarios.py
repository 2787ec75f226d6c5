"""Every fault scenario of configs/scenarios/, through the real scheduler, collectors and
Prometheus conversion: correct counts, nothing negative or counted twice, no stale series,
the affected group's `error` set and the others intact.

The emulation is deterministic: a second simulation with the same seed and scenario gives
the exact counter values the reports must add up to.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from exporters.prometheus.convert import ReportConverter
from exporters.prometheus.families import Family
from neuron_monitor.backends.emulated import EmulatedBackend, emulated_identity
from neuron_monitor.backends.scenario import load_scenario
from neuron_monitor.backends.simulation import Simulation
from neuron_monitor.catalogue import instance_type
from neuron_monitor.config import default_config
from neuron_monitor.report import Report
from neuron_monitor.scheduler import Scheduler
from neuron_monitor.selfstats import DaemonStats

SCENARIOS = Path(__file__).resolve().parent.parent / "configs" / "scenarios"
INSTANCE = "trn1.32xlarge"
START = 100.0


class Run:
    def __init__(self, name: str, seconds: int, seed: int = 3) -> None:
        self.scenario = load_scenario(SCENARIOS / name)
        self.seed = seed
        t = [START]

        class Clock:
            def now(self) -> float:
                return t[0]

            async def sleep_until(self, deadline: float, wake: asyncio.Event) -> None:
                t[0] = max(t[0], deadline)

        backend = EmulatedBackend(INSTANCE, seed=seed, scenario=self.scenario, clock=Clock().now)
        self.reports: list[tuple[float, Report]] = []

        async def offload(func: Callable[..., Any], *args: Any) -> Any:
            return func(*args)

        scheduler = Scheduler(backend, default_config(1.0), lambda r: self.reports.append((t[0], r)), DaemonStats(),
                              emulated_identity(INSTANCE, seed), clock=Clock(), offload=offload)

        async def run() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(scheduler.run(stop))
            while not self.reports or self.reports[-1][0] < START + seconds:
                await asyncio.sleep(0)
            stop.set()
            await task

        asyncio.run(run())
        self.converter = ReportConverter()
        self.families: list[dict[str, Family]] = [
            {f.name: f for f in self.converter.convert(r)} for _, r in self.reports]

    def sim_at(self, t: float) -> Simulation:
        sim = Simulation(instance_type(INSTANCE), self.scenario, self.seed, START)
        sim.advance_to(t)
        return sim

    def entries(self, tag: str) -> list[tuple[float, Any]]:
        return [(t, e) for t, r in self.reports for e in r.neuron_runtime_data if e.neuron_runtime_tag == tag]


def status_total(sim: Simulation, device: int, counter: str) -> int:
    phys = sim.arch.physical_cores_per_device
    return sum(c.status[counter] % 2**64 for c in sim.cores[device * phys:(device + 1) * phys])


def assert_no_negative(run: Run) -> None:
    for _, report in run.reports:
        data = report.model_dump()
        stack: list[Any] = [data]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
            elif isinstance(item, (int, float)) and not isinstance(item, bool):
                assert item >= 0


def test_ecc_storm_counts_exactly() -> None:
    run = Run("ecc-storm.json", 8)
    assert_no_negative(run)
    per_device: dict[int, int] = {}
    for _, report in run.reports:
        hw = report.system_data.neuron_hw_counters
        assert hw is not None and hw.error == ""
        for dev in hw.neuron_devices:
            per_device[dev.neuron_device_index] = per_device.get(dev.neuron_device_index, 0) + dev.mem_ecc_uncorrected
    assert per_device[1] == 3 * 40  # 3 s at 40 events/s, all inside the reports' window
    assert per_device[0] == 0
    ecc = run.families[-1]["hardware_ecc_events"].samples
    device1 = [v for lab, v in ecc.items() if 'neuron_device_index="1"' in lab and "mem_ecc_uncorrected" in lab]
    assert device1 == [120]
    storm = [v for lab, v in ecc.items() if 'neuron_device_index="1"' in lab and '"sram_ecc_corrected"' in lab]
    assert storm == [300]


@pytest.mark.parametrize(("name", "counter", "summary", "kind"), [
    ("nan-burst.json", "execute_completed_with_num_error", "completed_with_num_err", "numerical"),
    ("hung-executions.json", "timeout", "timed_out", "transient"),
])
def test_error_bursts_match_the_driver_counters(name: str, counter: str, summary: str, kind: str) -> None:
    run = Run(name, 9)
    assert_no_negative(run)
    entries = run.entries(run.scenario.applications[0].tag or "")  # type: ignore[index]
    counted = sum(getattr(e.report.execution_stats.execution_summary, summary) for _, e in entries)
    errors = sum(getattr(e.report.execution_stats.error_summary, kind) for _, e in entries)
    first, last = run.reports[0][0], run.reports[-1][0]
    # the reports' counts add up to exactly what the driver's counters moved, start to end
    baseline = START  # the scheduler's baseline snapshot
    expected = status_total(run.sim_at(last), 0, counter) - status_total(run.sim_at(baseline), 0, counter)
    assert counted == errors == expected > 0
    assert first > baseline
    prom = run.families[-1]["execution_errors"].samples
    assert sum(v for lab, v in prom.items() if f'error_type="{kind}"' in lab) == expected
    if counter == "timeout":  # hung executions hold their cores: utilization rises during the burst
        def util(t0: float, t1: float) -> float:
            values = [u.neuroncore_utilization for t, e in entries if t0 < t <= t1
                      for u in e.report.neuroncore_counters.neuroncores_in_use.values()]
            return sum(values) / len(values)
        assert util(START + 3, START + 6) > util(START, START + 2) + 10


def test_driver_reload_errors_then_resets_without_negative_or_double_counts() -> None:
    run = Run("driver-reload.json", 12)
    assert_no_negative(run)
    during = [(t, r) for t, r in run.reports if START + 3.5 < t < START + 5.5]
    assert during
    for _, report in during:
        assert report.neuron_hardware_info.neuron_device_count == 15
        by_tag = {e.neuron_runtime_tag: e for e in report.neuron_runtime_data}
        assert by_tag["reloaded"].report.neuroncore_counters.error  # its cores are gone
        assert by_tag["stays"].report.neuroncore_counters.error == ""
        assert report.system_data.memory_info.error == "" and report.system_data.vcpu_usage.error == ""
    normal = max(e.report.execution_stats.execution_summary.completed for t, e in run.entries("reloaded")
                 if t <= START + 3)
    after = [e.report.execution_stats.execution_summary.completed for t, e in run.entries("reloaded")
             if t >= START + 7]
    assert after and max(after) <= 2 * normal  # counting restarts from zero: no spike from the reset
    totals = [[v for lab, v in fams["execution_status"].samples.items() if 'runtime_tag="reloaded"' in lab]
              for fams in run.families if "execution_status" in fams]
    served = [sum(values) for values in totals if values]  # not served while its group has an error
    assert len(served) < len(totals)
    assert served == sorted(served)  # the Prometheus counter never goes down, across the reset too


def test_counter_wrap_is_counted_across_the_overflow() -> None:
    run = Run("counter-wrap.json", 8)
    assert_no_negative(run)
    entries = run.entries("wrapper")
    flops = [e.report.neuroncore_counters.neuroncores_in_use["0"].flops for t, e in entries if t > START + 0.5]
    assert max(flops) < 10 * min(flops)  # no astronomically large period across the wrap
    completed = sum(e.report.execution_stats.execution_summary.completed for _, e in entries)
    last = run.reports[-1][0]
    expected = (status_total(run.sim_at(last), 0, "success") - status_total(run.sim_at(START), 0, "success")) \
        % 2**64
    assert completed == expected  # exactly the executions, counted through the wrap


def test_churn_leaves_no_stale_series() -> None:
    run = Run("app-churn.json", 15)
    assert_no_negative(run)
    seen = set()
    for (t, report), fams in zip(run.reports, run.families, strict=True):
        tags = {e.neuron_runtime_tag for e in report.neuron_runtime_data}
        seen |= tags
        live = {app.effective_tag for app in run.sim_at(t).applications()}
        assert tags == live
        for name in ("neuroncore_utilization_ratio", "execution_status"):
            if name in fams:
                labelled = {lab.split('runtime_tag="')[1].split('"')[0] for lab in fams[name].samples}
                assert labelled <= tags
    assert len(seen) >= 12  # dozens a minute came and went


def test_garbage_files_error_the_group_and_lose_nothing() -> None:
    run = Run("garbage-files.json", 10)
    assert_no_negative(run)
    during = [(t, r) for t, r in run.reports if START + 2.5 < t < START + 4.5]
    assert during
    for _, report in during:
        by_tag = {e.neuron_runtime_tag: e for e in report.neuron_runtime_data}
        victim, bystander = by_tag["victim"].report, by_tag["bystander"].report
        assert "not a counter value" in victim.neuroncore_counters.error
        assert "not a counter value" in victim.execution_stats.error
        assert victim.memory_used.error == "" or "not a counter value" in victim.memory_used.error
        assert bystander.neuroncore_counters.error == "" and bystander.execution_stats.error == ""
        assert report.system_data.memory_info.error == ""
    after = run.reports[-1][1]
    assert {e.neuron_runtime_tag: e for e in after.neuron_runtime_data}["victim"].report.execution_stats.error == ""
    # what happened while the files were garbage is counted once, with the next good read
    completed = sum(e.report.execution_stats.execution_summary.completed for _, e in run.entries("victim"))
    last = run.reports[-1][0]
    assert completed == status_total(run.sim_at(last), 0, "success") - status_total(run.sim_at(START), 0, "success")
