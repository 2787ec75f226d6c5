"""Neuron applications from procfs: the processes holding a `/dev/neuron<N>` open.

For each process: the devices it holds (its fd links), its tag (`NEURON_PROCESS_TAG` in
its environment, else the PID), the logical cores it uses (`NEURON_RT_VISIBLE_CORES`,
else every core of the devices it holds) and its CPU time (`/proc/PID/stat`).  Reading
another user's fd links and environment needs root or CAP_SYS_PTRACE: a process whose
fds we cannot list cannot be recognised at all (they are counted and logged), one whose
environment we cannot read is reported with an `error`.

A process that was already running when it was first looked at, and opened a device only
later, is noticed within `recheck_s` (10 s).
"""

from __future__ import annotations

import errno
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from neuron_monitor.backends.scenario import parse_core_list

log = logging.getLogger(__name__)

_DEVICE_LINK = re.compile(r"neuron(\d+)")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
MAX_ENVIRON_BYTES = 1 << 20
TAG_MAX = 255


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    pid: int
    devices: tuple[int, ...]
    tag: str
    visible_cores: tuple[int, ...] | None  # from NEURON_RT_VISIBLE_CORES
    error: str = ""


class ProcessScanner:
    def __init__(self, procfs_root: str, devfs_root: str, recheck_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.procfs_root = procfs_root
        # Listing every process's descriptors is most of a scan's cost.  A process found not
        # to use Neuron is looked at again only after `recheck_s`; new processes and known
        # Neuron applications are looked at on every scan.
        self.recheck_s = recheck_s
        self._clock = clock
        self._not_neuron: dict[str, float] = {}
        # Links name the device as the process opened it: under our --devfs-path, or
        # /dev as seen inside the process's own mount namespace.
        self._device_dirs = {os.path.normpath(devfs_root), "/dev"}
        self.uninspectable = 0
        self._warned = False

    def _devices_held(self, pid: str) -> tuple[int, ...] | None:
        fd_dir = os.path.join(self.procfs_root, pid, "fd")
        try:
            fds = os.listdir(fd_dir)
        except PermissionError:
            self.uninspectable += 1
            return None
        except OSError:
            return None  # exited meanwhile
        held: set[int] = set()
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            head, name = os.path.split(target)
            match = _DEVICE_LINK.fullmatch(name)
            if match and head in self._device_dirs:
                held.add(int(match.group(1)))
        return tuple(sorted(held))

    def scan(self) -> list[ProcessInfo]:
        self.uninspectable = 0
        try:
            pids = [p for p in os.listdir(self.procfs_root) if p.isdigit()]
        except OSError as exc:
            raise OSError(f"cannot list {self.procfs_root}: {exc.strerror}") from None
        found = []
        own = str(os.getpid())
        now = self._clock()
        not_neuron = self._not_neuron
        for pid in pids:
            if pid == own:
                continue
            checked = not_neuron.get(pid)
            if checked is not None and now - checked < self.recheck_s:
                continue
            devices = self._devices_held(pid)
            if devices:
                not_neuron.pop(pid, None)
                found.append(self._describe(int(pid), devices))
            else:
                not_neuron[pid] = now
        if len(not_neuron) > 2 * len(pids) + 64:  # forget processes that are gone
            alive = set(pids)
            self._not_neuron = {pid: t for pid, t in not_neuron.items() if pid in alive}
        if self.uninspectable and not self._warned:
            log.warning("%d processes could not be inspected (their fds are not readable: run as root or with "
                        "CAP_SYS_PTRACE to see Neuron applications of other users)", self.uninspectable)
            self._warned = True
        return sorted(found, key=lambda p: p.pid)

    def _describe(self, pid: int, devices: tuple[int, ...]) -> ProcessInfo:
        path = os.path.join(self.procfs_root, str(pid), "environ")
        try:
            with open(path, "rb") as fh:
                environ = fh.read(MAX_ENVIRON_BYTES)
        except OSError as exc:
            reason = "permission denied" if exc.errno in (errno.EACCES, errno.EPERM) else exc.strerror
            return ProcessInfo(pid, devices, str(pid), None, f"cannot read {path}: {reason}")
        tag = str(pid)
        cores: tuple[int, ...] | None = None
        error = ""
        for item in environ.split(b"\0"):
            key, _, value = item.partition(b"=")
            if key == b"NEURON_PROCESS_TAG" and value:
                tag = value.decode("utf-8", "replace")[:TAG_MAX]
            elif key == b"NEURON_RT_VISIBLE_CORES" and value:
                try:
                    cores = parse_core_list(value.decode("ascii", "replace"))
                except ValueError as exc:
                    error = f"NEURON_RT_VISIBLE_CORES: {exc}"
        return ProcessInfo(pid, devices, tag, cores, error)

    def cpu_seconds(self, pid: int) -> tuple[float, float]:
        """(user, system) CPU seconds of a process from /proc/PID/stat."""
        with open(os.path.join(self.procfs_root, str(pid), "stat"), "rb") as fh:
            raw = fh.read(4096)
        # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
        fields = raw[raw.rindex(b")") + 2:].split()
        return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS
