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
    DeviceReading,
    HardwareReading,
    Need,
    Snapshot,
)
from neuron_monitor.backends.sysfs.files import CounterVector, FileCache, ReadError, raise_fd_limit
from neuron_monitor.backends.sysfs.procfs import ProcessInfo, ProcessScanner
from neuron_monitor.backends.sysfs.readings import (
    BulkPlan,
    core_counter_paths,
    core_reading,
    device_counter_paths,
    device_reading,
)
from neuron_monitor.backends.sysfs.tree import CoreLayout, DeviceLayout, device_root, discover, list_devices

log = logging.getLogger(__name__)

# After the one-vector read of every file found a bad one, cores are read one by one (so
# the error lands on the right core) for this many cycles before the fast read is tried again.
BULK_PAUSE_CYCLES = 10


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
        self._plans: dict[tuple[bool, bool, bool], BulkPlan] = {}
        self._cycles = 0
        self._bulk_paused_until = 0
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
        self._plans.clear()
        self._bulk_paused_until = 0
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
        """One core on its own (the fallback when the bulk read found a bad file)."""
        counter_vec, memory_vec = self._vectors_for(layout)
        try:
            return core_reading(layout, counter_vec.read() if counters else None,
                                memory_vec.read() if memory else None)
        except ReadError as exc:
            return CoreReading(layout.core, layout.device, 0, 0, EMPTY_COUNTERS, error=str(exc))

    def _device(self, layout: DeviceLayout) -> DeviceReading:
        vector = self._device_vectors.get(layout.device)
        if vector is None:
            vector = self._device_vectors[layout.device] = CounterVector(device_counter_paths(layout), self._files)
        try:
            return device_reading(layout, vector.read())
        except ReadError as exc:
            return DeviceReading(layout.device, error=str(exc))

    def _read_counters(self, counters: bool, memory: bool, devices: bool
                       ) -> tuple[dict[int, CoreReading] | None, dict[int, DeviceReading] | None]:
        """All wanted core and device files in one vector; core by core when that fails."""
        key = (counters, memory, devices)
        if self._bulk_paused_until <= self._cycles:
            plan = self._plans.get(key)
            if plan is None:
                plan = self._plans[key] = BulkPlan.build(self._devices, self._files, counters, memory, devices)
            try:
                core_map, device_map = plan.read()
                return (core_map if counters or memory else None), (device_map if devices else None)
            except ReadError:
                # Some file is bad: read core by core to pin the error on its own core or
                # device, and do only that for a while (the fault may last).
                self._bulk_paused_until = self._cycles + BULK_PAUSE_CYCLES
        by_core = {c.core: self._core(c, counters, memory) for dev in self._devices for c in dev.cores} \
            if counters or memory else None
        by_device = {dev.device: self._device(dev) for dev in self._devices} if devices else None
        return by_core, by_device

    def counter_paths(self) -> list[str]:
        """Every file one snapshot of all parts reads each cycle (the benchmark's floor reads
        exactly these)."""
        return BulkPlan.build(self._devices, self._files, True, True, True).vector.paths

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
        self._cycles += 1
        counters = Need.CORES in needs
        memory = Need.CORE_MEMORY in needs
        want_devices = Need.DEVICES in needs or Need.APP_MEMORY in needs
        cores = device_map = None
        if Need.CORES in errors:
            if want_devices:
                _, device_map = self._read_counters(False, False, True)
        else:
            cores, device_map = self._read_counters(counters, memory, want_devices)
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
