"""Which counter files a snapshot reads, and how their values become readings.

The common case reads every wanted file of every core and device as one vector (one
list comprehension of `pread`s, one validation), then slices it per core: per-core
Python work is then a few slices, not a read call each.  When anything in the vector is
wrong (a garbage, truncated or vanished file) the caller falls back to reading core by
core, so the culprit's `error` lands on its own core or device only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from neuron_monitor.backends.base import EMPTY_COUNTERS, CoreReading, CounterSet, DeviceReading
from neuron_monitor.backends.sysfs.files import CounterVector, FileCache
from neuron_monitor.backends.sysfs.tree import CoreLayout, DeviceLayout

ECC_FILES = ("mem_ecc_uncorrected", "sram_ecc_uncorrected", "mem_ecc_repairable_uncorrected")


def core_counter_paths(layout: CoreLayout) -> tuple[list[str], list[str]]:
    """A core's files: (busy time, flops, then every status counter) and (device memory of
    each reported category).  Only what the report uses is read."""
    stats = os.path.join(layout.path, "stats")
    other = os.path.join(stats, "other_info")
    counters = [os.path.join(other, "nc_time_in_use", "total"), os.path.join(other, "flop_count", "total")]
    counters += [os.path.join(stats, "status", name, "total") for name in layout.status_names]
    mem_dir = os.path.join(stats, "memory_usage", "device_mem")
    return counters, [os.path.join(mem_dir, c, "present") for c in layout.memory_categories]


def device_counter_paths(layout: DeviceLayout) -> list[str]:
    """A device's files: its ECC counters, then host memory of each reported category."""
    stats = os.path.join(layout.path, "stats")
    paths = [os.path.join(stats, "hardware", name) for name in ECC_FILES if name in layout.hardware_stats]
    paths += [os.path.join(stats, "memory_usage", "host_mem", c, "present") for c in layout.host_categories]
    return paths


def core_reading(layout: CoreLayout, counters: list[int] | None, memory: list[int] | None) -> CoreReading:
    """A reading from the values of `core_counter_paths` (either part may be absent)."""
    busy = flops = 0
    status = EMPTY_COUNTERS
    if counters is not None:
        busy, flops = counters[0], counters[1]
        status = CounterSet(layout.status_names, tuple(counters[2:]))
    device_memory = dict(zip(layout.memory_categories, memory, strict=True)) if memory is not None else {}
    return CoreReading(layout.core, layout.device, busy, flops, status, device_memory)


def device_reading(layout: DeviceLayout, values: list[int]) -> DeviceReading:
    """A reading from the values of `device_counter_paths`."""
    ecc_names = [name for name in ECC_FILES if name in layout.hardware_stats]
    ecc = dict(zip(ecc_names, values, strict=False))
    host = dict(zip(layout.host_categories, values[len(ecc_names):], strict=True))
    return DeviceReading(
        layout.device,
        mem_ecc_uncorrected=ecc.get("mem_ecc_uncorrected", 0),
        sram_ecc_uncorrected=ecc.get("sram_ecc_uncorrected", 0),
        mem_ecc_repairable_uncorrected=ecc.get("mem_ecc_repairable_uncorrected", 0),
        host_memory=host,
    )


@dataclass(frozen=True, slots=True)
class BulkPlan:
    """Every wanted file of every core and device, in one vector."""

    vector: CounterVector
    cores: tuple[tuple[CoreLayout, int, int], ...]  # layout, counter files, memory files
    devices: tuple[tuple[DeviceLayout, int], ...]  # layout, files

    @classmethod
    def build(cls, devices: list[DeviceLayout], files: FileCache, counters: bool, memory: bool,
              with_devices: bool) -> BulkPlan:
        paths: list[str] = []
        cores = []
        for dev in devices if counters or memory else ():
            for core in dev.cores:
                counter_paths, memory_paths = core_counter_paths(core)
                counter_paths = counter_paths if counters else []
                memory_paths = memory_paths if memory else []
                paths += counter_paths + memory_paths
                cores.append((core, len(counter_paths), len(memory_paths)))
        device_parts = []
        if with_devices:
            for dev in devices:
                dev_paths = device_counter_paths(dev)
                paths += dev_paths
                device_parts.append((dev, len(dev_paths)))
        return cls(CounterVector(paths, files), tuple(cores), tuple(device_parts))

    def read(self) -> tuple[dict[int, CoreReading], dict[int, DeviceReading]]:
        """Raises ReadError when any file is bad: then read core by core instead."""
        values = self.vector.read()
        cores: dict[int, CoreReading] = {}
        at = 0
        for layout, n_counters, n_memory in self.cores:
            mid, end = at + n_counters, at + n_counters + n_memory
            cores[layout.core] = core_reading(layout, values[at:mid] if n_counters else None,
                                              values[mid:end] if n_memory else None)
            at = end
        devices: dict[int, DeviceReading] = {}
        for dev_layout, n in self.devices:
            devices[dev_layout.device] = device_reading(dev_layout, values[at:at + n])
            at += n
        return cores, devices
