"""The sysfs backend: the Neuron driver's files (SPEC §5) and procfs.

What sysfs cannot tell, and what we report instead (also in the README):
- execution latencies are known only to the runtime: `latency_stats` percentiles are null;
- the driver has no corrected-ECC counters: `mem_ecc_corrected`/`sram_ecc_corrected` are 0;
- loaded models are known only to the runtime: `loaded_models` is empty;
- host memory is counted per device: each application holding a device gets an equal share.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from neuron_monitor.backends.base import (
    EMPTY_COUNTERS,
    REPORTED_HOST_MEMORY,
    AppReading,
    BackendUnavailable,
    CoreReading,
    CounterSet,
    DeviceReading,
    HardwareReading,
    Need,
    Snapshot,
)
from neuron_monitor.backends.sysfs.files import CounterVector, FileCache, ReadError, raise_fd_limit
from neuron_monitor.backends.sysfs.procfs import ProcessInfo, ProcessScanner
from neuron_monitor.backends.sysfs.tree import CoreLayout, DeviceLayout, device_root, discover, list_devices

log = logging.getLogger(__name__)

_ECC_FILES = ("mem_ecc_uncorrected", "sram_ecc_uncorrected", "mem_ecc_repairable_uncorrected")


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
    paths = [os.path.join(stats, "hardware", name) for name in _ECC_FILES if name in layout.hardware_stats]
    paths += [os.path.join(stats, "memory_usage", "host_mem", c, "present") for c in layout.host_categories]
    return paths


class SysfsBackend:
    name = "sysfs"

    def __init__(self, sysfs_root: str = "/sys", procfs_root: str = "/proc", devfs_root: str = "/dev") -> None:
        root = device_root(sysfs_root)
        if root is None:
            raise BackendUnavailable(
                f"no Neuron driver found under {sysfs_root} (expected {sysfs_root}/devices/virtual/neuron_device); "
                "on a machine without Neuron devices use --emulate INSTANCE_TYPE"
            )
        self._sysfs_root = sysfs_root
        self._root = root
        limit = raise_fd_limit()
        # Leave room for sockets, the /proc scan and the exporters.
        self._files = FileCache(max_open=max(0, limit - 512))
        self._scanner = ProcessScanner(procfs_root, devfs_root)
        self._listing: list[tuple[int, str]] = []
        self._core_vectors: dict[int, tuple[CounterVector, CounterVector]] = {}
        self._device_vectors: dict[int, CounterVector] = {}
        self._devices: list[DeviceLayout] = []
        self._hardware = HardwareReading("", "", 0, 0, 0, None)
        self._rediscover_if_changed()

    def hardware(self) -> HardwareReading:
        return self._hardware

    def close(self) -> None:
        self._files.close()

    def _rediscover_if_changed(self) -> None:
        listing = list_devices(self._root)
        if listing == self._listing and self._devices:
            return
        gone = {path for _, path in self._listing} - {path for _, path in listing}
        for path in gone:
            self._files.forget_under(path + os.sep)
        self._devices, self._hardware = discover(self._sysfs_root)
        self._core_vectors.clear()
        self._device_vectors.clear()
        self._listing = listing
        if self._hardware.error:
            log.warning("device discovery: %s", self._hardware.error)
        log.info("sysfs: %d devices, %d cores per device", self._hardware.device_count,
                 self._hardware.physical_cores_per_device)

    # --- counters -----------------------------------------------------------------------

    def _vectors_for(self, layout: CoreLayout) -> tuple[CounterVector, CounterVector]:
        vectors = self._core_vectors.get(layout.core)
        if vectors is None:
            counters, memory = core_counter_paths(layout)
            vectors = self._core_vectors[layout.core] = (CounterVector(counters, self._files),
                                                         CounterVector(memory, self._files))
        return vectors

    def _core(self, layout: CoreLayout, counters: bool, memory: bool) -> CoreReading:
        counter_vec, memory_vec = self._vectors_for(layout)
        try:
            busy = flops = 0
            status = EMPTY_COUNTERS
            device_memory: dict[str, int] = {}
            if counters:
                values = counter_vec.read()
                busy, flops = values[0], values[1]
                status = CounterSet(layout.status_names, tuple(values[2:]))
            if memory:
                device_memory = dict(zip(layout.memory_categories, memory_vec.read(), strict=True))
        except ReadError as exc:
            return CoreReading(layout.core, layout.device, 0, 0, EMPTY_COUNTERS, error=str(exc))
        return CoreReading(layout.core, layout.device, busy, flops, status, device_memory)

    def _device(self, layout: DeviceLayout) -> DeviceReading:
        vector = self._device_vectors.get(layout.device)
        if vector is None:
            vector = self._device_vectors[layout.device] = CounterVector(device_counter_paths(layout), self._files)
        try:
            values = vector.read()
        except ReadError as exc:
            return DeviceReading(layout.device, error=str(exc))
        ecc_names = [name for name in _ECC_FILES if name in layout.hardware_stats]
        ecc = dict(zip(ecc_names, values, strict=False))
        host = dict(zip(layout.host_categories, values[len(ecc_names):], strict=True))
        return DeviceReading(
            layout.device,
            mem_ecc_uncorrected=ecc.get("mem_ecc_uncorrected", 0),
            sram_ecc_uncorrected=ecc.get("sram_ecc_uncorrected", 0),
            mem_ecc_repairable_uncorrected=ecc.get("mem_ecc_repairable_uncorrected", 0),
            host_memory=host,
        )

    def counter_paths(self) -> list[str]:
        """Every file one snapshot of all parts reads each cycle (the benchmark's floor reads
        exactly these)."""
        paths: list[str] = []
        for dev in self._devices:
            paths += device_counter_paths(dev)
            for core in dev.cores:
                counters, memory = core_counter_paths(core)
                paths += counters + memory
        return paths

    # --- applications ---------------------------------------------------------------------

    def _apps(self, needs: frozenset[Need], devices: Mapping[int, DeviceReading] | None) -> list[AppReading]:
        hw = self._hardware
        per_device = hw.logical_cores_per_device
        processes = self._scanner.scan()
        holders: dict[int, int] = {}
        for proc in processes:
            for d in proc.devices:
                holders[d] = holders.get(d, 0) + 1
        apps = []
        for proc in processes:
            cores = proc.visible_cores
            if cores is None:
                cores = tuple(c for d in proc.devices for c in range(d * per_device, (d + 1) * per_device))
            error = proc.error
            user = system = None
            if Need.APP_CPU in needs:  # read by the scan, with the check that the process is the same
                user, system = proc.cpu_user_s, proc.cpu_system_s
            host = self._host_share(proc, devices, holders) if Need.APP_MEMORY in needs else None
            apps.append(AppReading(proc.pid, proc.tag, cores, error=error, cpu_user_s=user, cpu_system_s=system,
                                   host_memory=host, models=None, latency=None))
        return apps

    @staticmethod
    def _host_share(proc: ProcessInfo, devices: Mapping[int, DeviceReading] | None,
                    holders: Mapping[int, int]) -> dict[str, int]:
        share = dict.fromkeys(REPORTED_HOST_MEMORY, 0)
        for d in proc.devices:
            reading = devices.get(d) if devices else None
            if reading is None or reading.error:
                continue
            for name in REPORTED_HOST_MEMORY:
                share[name] += reading.host_memory.get(name, 0) // max(1, holders.get(d, 1))
        return share

    # --- the protocol ---------------------------------------------------------------------

    def snapshot(self, needs: frozenset[Need], now: float) -> Snapshot:
        errors: dict[Need, str] = {}
        try:
            self._rediscover_if_changed()
        except OSError as exc:  # the device folder itself vanished between listing and reading
            errors[Need.CORES] = errors[Need.DEVICES] = f"device discovery failed: {exc}"
        counters = Need.CORES in needs
        memory = Need.CORE_MEMORY in needs
        cores = None
        if (counters or memory) and Need.CORES not in errors:
            cores = {c.core: self._core(c, counters, memory) for dev in self._devices for c in dev.cores}
        device_map = None
        if Need.DEVICES in needs or Need.APP_MEMORY in needs:
            device_map = {dev.device: self._device(dev) for dev in self._devices}
        apps = None
        if Need.APPLICATIONS in needs:
            try:
                apps = self._apps(needs, device_map)
            except OSError as exc:
                errors[Need.APPLICATIONS] = str(exc)
                apps = []
        return Snapshot(
            taken_at=now,
            hardware=self._hardware,
            cores=cores,
            devices=list(device_map.values()) if device_map is not None and Need.DEVICES in needs else None,
            applications=apps,
            errors=errors,
        )
