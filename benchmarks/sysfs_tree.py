"""A driver tree written by the emulator's writer, with real processes holding the devices,
for the sysfs benchmarks: the same files a real trn2.48xlarge exposes."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from neuron_monitor.backends.scenario import Scenario, format_core_list
from neuron_monitor.backends.simulation import Simulation
from neuron_monitor.catalogue import InstanceType, instance_type
from neuron_monitor.emulator.tree_writer import TreeWriter


@dataclass
class Tree:
    root: str
    sim: Simulation
    writer: TreeWriter

    @property
    def sysfs(self) -> str:
        return os.path.join(self.root, "sys")

    @property
    def devfs(self) -> str:
        return os.path.join(self.root, "dev")


def synthetic(base: str, devices: int) -> InstanceType:
    """An instance type like `base` with another device count (for the scaling curve)."""
    return replace(instance_type(base), name=f"{base}-x{devices}", device_count=devices)


@contextmanager
def emulated_tree(instance: InstanceType, seed: int = 1) -> Iterator[Tree]:
    sim = Simulation(instance, Scenario(), seed, start=0.0)
    sim.advance_to(30.0)
    with tempfile.TemporaryDirectory(prefix="nm-bench-") as root:
        writer = TreeWriter(root, sim)
        writer.create()
        writer.close()  # a static tree: its ~13,000 descriptors are not needed while measuring
        holders = []
        per_device = sim.arch.physical_cores_per_device // sim.lnc
        for app in sim.apps:
            device = app.cores[0] // per_device
            env = {**os.environ, "NEURON_PROCESS_TAG": app.tag or "", "NEURON_RT_VISIBLE_CORES":
                   format_core_list(app.cores)}
            holders.append(subprocess.Popen(
                [sys.executable, "-c", "import sys,time; f=open(sys.argv[1]); time.sleep(3600)",
                 os.path.join(root, "dev", f"neuron{device}")], env=env))
        time.sleep(0.5 + 0.02 * len(holders))
        try:
            yield Tree(root, sim, writer)
        finally:
            for proc in holders:
                proc.kill()
                proc.wait()
