"""Writes the simulation's state as the Neuron driver's sysfs tree (SPEC §5).

Values are rewritten in place (pwrite at offset 0, then truncate) on descriptors kept
open, and only when they changed, so a reader that keeps its own descriptors open (as
the sysfs backend does) sees every update.  A reader may catch a file between the write
and the truncate; the new value is then followed by the tail of the old one after a
newline, which the driver's format ("%llu\\n") lets a parser ignore.  Real sysfs
attributes are generated on each read and have no such window.
"""

from __future__ import annotations

import os
import shutil
import time

from neuron_monitor.backends.base import DEVICE_MEMORY_CATEGORIES, HOST_MEMORY_CATEGORIES
from neuron_monitor.backends.simulation import COUNTER_LIMIT, Simulation
from neuron_monitor.backends.sysfs.tree import CLASS_DIR, DEVICE_DIR
from neuron_monitor.execution_mapping import STATUS_COUNTERS

_OTHER_INFO = ("model_load_count", "reset_req_count", "reset_fail_count", "inference_count", "flop_count",
               "nc_time_in_use")
_ECC_FILES = ("sram_ecc_uncorrected", "mem_ecc_uncorrected", "mem_ecc_repairable_uncorrected")
MAX_OPEN_FILES = 4096


class TreeWriter:
    def __init__(self, root: str, simulation: Simulation) -> None:
        self.root = root
        self.sim = simulation
        self.device_dir = os.path.join(root, "sys", DEVICE_DIR)
        self.class_dir = os.path.join(root, "sys", CLASS_DIR)
        self.dev_dir = os.path.join(root, "dev")
        self._fds: dict[str, int] = {}
        self._last: dict[str, bytes] = {}
        self._previous: dict[str, int] = {}  # for the `present` (last increment) files
        self._peaks: dict[str, int] = {}
        self._alloc_totals: dict[str, int] = {}
        self.writes = 0
        self._garbage_paths: set[str] = set()  # files a fault event fills with garbage for now
        self._removed: set[int] = set()  # devices a driver-reload event took away

    # --- low level ------------------------------------------------------------------------

    def _put(self, path: str, data: bytes, garbage: bool = False) -> None:
        if self._last.get(path) == data or (path in self._garbage_paths and not garbage):
            return
        fd = self._fds.get(path)
        keep = fd is not None
        if fd is None:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            # A trn2.48xlarge tree has ~13,000 files: keep the most recently created ones open
            # up to a bound, and open/close the rest on each write.
            keep = len(self._fds) < MAX_OPEN_FILES
            if keep:
                self._fds[path] = fd
        try:
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
        finally:
            if not keep:
                os.close(fd)
        self._last[path] = data
        self.writes += 1

    def _counter(self, folder: str, total: int) -> None:
        """A driver counter folder: `total` cumulative, `present` the last increment."""
        total %= COUNTER_LIMIT  # the driver's counters are u64
        prev = self._previous.get(folder, 0)
        self._previous[folder] = total
        self._put(os.path.join(folder, "total"), b"%d\n" % total)
        self._put(os.path.join(folder, "present"), b"%d\n" % ((total - prev) % COUNTER_LIMIT))

    def _memory(self, folder: str, present: int) -> None:
        """A memory counter folder: `present` bytes now, `peak`, and `total` bytes ever allocated."""
        before = self._last.get(os.path.join(folder, "present"))
        grew = present - (int(before) if before else 0)
        self._alloc_totals[folder] = self._alloc_totals.get(folder, 0) + max(0, grew)
        self._peaks[folder] = max(self._peaks.get(folder, 0), present)
        self._put(os.path.join(folder, "present"), b"%d\n" % present)
        self._put(os.path.join(folder, "peak"), b"%d\n" % self._peaks[folder])
        self._put(os.path.join(folder, "total"), b"%d\n" % self._alloc_totals[folder])

    def remove_device(self, device: int) -> None:
        """Make a device vanish (driver reload / device reset): close and delete its folder."""
        prefix = os.path.join(self.device_dir, f"neuron{device}") + os.sep
        for path in [p for p in self._fds if p.startswith(prefix)]:
            os.close(self._fds.pop(path))
        for cache in (self._last, self._previous, self._peaks, self._alloc_totals):
            for key in [k for k in cache if k.startswith(prefix)]:
                del cache[key]
        shutil.rmtree(prefix, ignore_errors=True)
        link = os.path.join(self.class_dir, f"neuron{device}")
        if os.path.islink(link):
            os.unlink(link)

    # --- the tree ---------------------------------------------------------------------------

    def create(self) -> None:
        """Static files: architecture, core counts, device nodes, class links."""
        os.makedirs(self.class_dir, exist_ok=True)
        os.makedirs(self.dev_dir, exist_ok=True)
        for device in self.sim.devices:
            self._create_device(device.device)
        self.update()

    def _create_device(self, index: int) -> None:
        arch = self.sim.arch
        base = os.path.join(self.device_dir, f"neuron{index}")
        n = self.sim.instance.device_count
        self._put(os.path.join(base, "core_count"), b"%d" % arch.physical_cores_per_device)
        peers = [str((index + k) % n) for k in (1, 3, n // 2) if n > 1 and (index + k) % n != index]
        self._put(os.path.join(base, "connected_devices"), (", ".join(dict.fromkeys(peers)) + "\n").encode())
        info = os.path.join(base, "info", "architecture")
        self._put(os.path.join(info, "arch_type"), (arch.device_arch + "\n").encode())
        self._put(os.path.join(info, "instance_type"), (arch.instance_type_tag + "\n").encode())
        self._put(os.path.join(info, "device_name"), (arch.device_name + "\n").encode())
        if arch.has_serial_number:
            self._put(os.path.join(base, "info", "serial_number"), b"%016x\n" % (0x5E0000 + index))
        for k in range(arch.physical_cores_per_device):
            core_info = os.path.join(base, f"neuron_core{k}", "info", "architecture", "arch_type")
            self._put(core_info, (arch.core_arch + "\n").encode())
        link = os.path.join(self.class_dir, f"neuron{index}")
        if not os.path.lexists(link):
            os.symlink(os.path.relpath(base, self.class_dir), link)
        node = os.path.join(self.dev_dir, f"neuron{index}")
        if not os.path.exists(node):
            with open(node, "wb"):
                pass

    def restore_device(self, index: int) -> None:
        self._create_device(index)

    def _follow_events(self) -> None:
        """Devices a driver reload takes away and brings back; files filled with garbage."""
        sim = self.sim
        for device in sorted(sim.absent_devices - self._removed):
            self.remove_device(device)
            self._removed.add(device)
        for device in sorted(self._removed - sim.absent_devices):
            self._removed.discard(device)
            self.restore_device(device)
        wanted = {}
        for (device, core, file), content in sim.garbage.items():
            base = os.path.join(self.device_dir, f"neuron{device}")
            wanted[os.path.join(base, f"neuron_core{core}", file) if core is not None else
                   os.path.join(base, file)] = content.encode()
        self._garbage_paths = set(wanted)
        for path, data in wanted.items():
            self._put(path, data, garbage=True)

    def update(self) -> None:
        sim = self.sim
        arch = sim.arch
        phys = arch.physical_cores_per_device
        if sim.absent_devices or self._removed or sim.garbage or self._garbage_paths:
            self._follow_events()
        present_devices = {d for d in range(sim.instance.device_count)
                           if os.path.isdir(os.path.join(self.device_dir, f"neuron{d}"))}
        for device in sim.devices:
            if device.device not in present_devices:
                continue
            base = os.path.join(self.device_dir, f"neuron{device.device}")
            stats = os.path.join(base, "stats")
            for cat in HOST_MEMORY_CATEGORIES:
                self._memory(os.path.join(stats, "memory_usage", "host_mem", cat), device.host_memory.get(cat, 0))
            if arch.has_hardware_stats:
                for name in _ECC_FILES:
                    self._put(os.path.join(stats, "hardware", name), b"%d\n" % device.ecc[name])
            self._put(os.path.join(stats, "power", "utilization"), self._power(device.device))
            for k in range(phys):
                core = sim.cores[device.device * phys + k]
                cstats = os.path.join(base, f"neuron_core{k}", "stats")
                seen = sim.seen
                for name in STATUS_COUNTERS:
                    self._counter(os.path.join(cstats, "status", name), seen(core.core, name, core.status[name]))
                mem = os.path.join(cstats, "memory_usage")
                self._memory(os.path.join(mem, "host_mem"), core.host_memory)
                self._memory(os.path.join(mem, "device_mem"), sum(core.device_memory.values()))
                for cat in DEVICE_MEMORY_CATEGORIES:
                    self._memory(os.path.join(mem, "device_mem", cat), core.device_memory[cat])
                other = os.path.join(cstats, "other_info")
                executions = sum(core.status.values())
                values = {"model_load_count": core.model_load_count, "reset_req_count": 0, "reset_fail_count": 0,
                          "inference_count": executions, "flop_count": seen(core.core, "flop_count", core.flops),
                          "nc_time_in_use": seen(core.core, "nc_time_in_use", core.busy_us)}
                for name in _OTHER_INFO:
                    self._counter(os.path.join(other, name), values[name])

    def _power(self, device: int) -> bytes:
        phys = self.sim.arch.physical_cores_per_device
        busy = [c.busy_us for c in self.sim.cores[device * phys:(device + 1) * phys]]
        elapsed = max(1e-9, self.sim.steps * 0.1) * 1e6
        avg = min(100, int(sum(busy) / len(busy) / elapsed * 100)) if busy else 0
        return b"POWER_STATUS_VALID,%d,%d,%d,%d\n" % (int(time.time()), max(0, avg - 5), min(100, avg + 5), avg)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
