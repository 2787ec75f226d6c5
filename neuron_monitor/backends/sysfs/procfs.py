"""Neuron applications from procfs: the processes holding a `/dev/neuron<N>` open.

For each process: the devices it holds (its fd links), its tag (`NEURON_PROCESS_TAG` in
its environment, else the PID), the logical cores it uses (`NEURON_RT_VISIBLE_CORES`,
else every core of the devices it holds) and its CPU time (`/proc/PID/stat`).  Reading
another user's fd links and environment needs root or CAP_SYS_PTRACE: a process whose
fds we cannot list cannot be recognised at all (they are counted and logged), one whose
environment we cannot read is reported with an `error`.

What is re-read on each scan and what only every `recheck_s` (10 s) is explained on
`ProcessScanner`.
"""

from __future__ import annotations

import dataclasses
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
    cpu_user_s: float | None = None  # cumulative, from /proc/PID/stat as of this scan
    cpu_system_s: float | None = None


@dataclass(frozen=True, slots=True)
class _Stat:
    start: bytes  # start time since boot: a reused PID has a different one
    user_s: float
    system_s: float


def parse_stat(raw: bytes) -> _Stat:
    """/proc/PID/stat: the command name (field 2) may hold spaces and parentheses, so the
    fields are counted from after the last ')'."""
    fields = raw[raw.rindex(b")") + 2:].split()
    start = fields[19] if len(fields) > 19 else b""
    return _Stat(start, int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS)


@dataclass(slots=True)
class _NotNeuron:
    """A process seen not to hold a Neuron device, and when to look again."""

    next_at: float
    start: bytes
    full_at: float  # when its descriptors are next all looked at, not just the new ones
    fds: frozenset[str] = frozenset()  # its descriptor numbers at the last look (large processes only)


@dataclass(slots=True)
class _Known:
    info: ProcessInfo
    start: bytes
    inspected_at: float


class ProcessScanner:
    """Finds Neuron applications; cheap enough to run every second.

    Listing a process's descriptors and reading its environment are most of a scan's
    cost, so each is done once per `recheck_s` per process, not on every scan:
      - a new process is inspected at once;
      - a known Neuron application is confirmed on every scan by one read of its
        /proc/PID/stat, which also gives its CPU time; the start time in it tells a
        reused PID from the same process (then it is inspected afresh).  Its devices,
        tag and cores are looked at again every `recheck_s`: an application that closes
        its devices but keeps running leaves the report within that time;
      - a process found not to use Neuron is looked at again after `recheck_s` (one
        that opens a device later is noticed within that time).  A process with many
        descriptors (a database, a proxy: thousands) would cost thousands of readlinks
        per look, so for one with more than `SMALL_FD_COUNT` only descriptor numbers that
        are new since the last look are read, and all of them every `full_recheck_s`
        (a device opened under a reused descriptor number is noticed within that time);
      - first looks are spread over the recheck interval, so processes seen together at
        start-up are not all looked at again in the same cycle.
    """

    SMALL_FD_COUNT = 128

    def __init__(self, procfs_root: str, devfs_root: str, recheck_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic, full_recheck_s: float = 60.0) -> None:
        self.procfs_root = procfs_root
        self.recheck_s = recheck_s
        self.full_recheck_s = full_recheck_s
        self._clock = clock
        self._not_neuron: dict[str, _NotNeuron] = {}
        self._known: dict[str, _Known] = {}
        # Links name the device as the process opened it: under our --devfs-path, or
        # /dev as seen inside the process's own mount namespace.
        self._device_dirs = {os.path.normpath(devfs_root), "/dev"}
        self._link_prefixes = tuple(os.path.join(d, "neuron") for d in self._device_dirs)
        self.uninspectable = 0
        self.links_read = 0  # readlink calls made (for tests and the benchmark)
        self._warned = False

    def _devices_held(self, pid: str, seen: frozenset[str] = frozenset()
                      ) -> tuple[tuple[int, ...], frozenset[str]] | None:
        """The devices a process holds among its descriptors not in `seen`, and all its
        descriptor numbers; None when its descriptors cannot be listed."""
        fd_dir = os.path.join(self.procfs_root, pid, "fd")
        try:
            fds = os.listdir(fd_dir)
        except PermissionError:
            self.uninspectable += 1
            return None
        except OSError:
            return None  # exited meanwhile
        names = frozenset(fds)
        held: set[int] = set()
        prefix = fd_dir + os.sep
        prefixes = self._link_prefixes
        for fd in names - seen if seen else fds:
            try:
                target = os.readlink(prefix + fd)
            except OSError:
                continue
            if not target.startswith(prefixes):  # nearly every descriptor: decided in C
                continue
            head, name = os.path.split(target)
            match = _DEVICE_LINK.fullmatch(name)
            if match and head in self._device_dirs:
                held.add(int(match.group(1)))
        self.links_read += len(fds) - (len(seen & names) if seen else 0)
        return tuple(sorted(held)), names

    def _stat(self, pid: str) -> _Stat | None:
        try:
            with open(os.path.join(self.procfs_root, pid, "stat"), "rb") as fh:
                return parse_stat(fh.read(4096))
        except (OSError, ValueError, IndexError):
            return None  # exited (or a stat we cannot parse: treated as gone)

    def _inspect(self, pid: str, now: float, before: _NotNeuron | None) -> ProcessInfo | None:
        """A look at one process; remembers the answer either way."""
        stat = self._stat(pid)
        if stat is None:  # exited
            self._known.pop(pid, None)
            self._not_neuron.pop(pid, None)
            return None
        seen: frozenset[str] = frozenset()
        full_at = now + self.full_recheck_s
        if before is not None and before.start == stat.start and now < before.full_at:
            seen, full_at = before.fds, before.full_at  # the same process: only its new descriptors
        found = self._devices_held(pid, seen)
        if found is None or not found[0]:
            # after a first look, the next looks are spread over the interval
            spread = 0.5 + (int(pid) % 97) / 194 if before is None else 1.0
            next_at = now + self.recheck_s * spread
            fds = found[1] if found is not None and len(found[1]) > self.SMALL_FD_COUNT else frozenset()
            self._known.pop(pid, None)
            self._not_neuron[pid] = _NotNeuron(next_at, stat.start, full_at, fds)
            return None
        devices = found[0]
        if seen:  # only new descriptors were read: the device list must cover all of them
            full = self._devices_held(pid)
            devices = full[0] if full is not None else devices
        self._not_neuron.pop(pid, None)
        info = self._describe(int(pid), devices)
        self._known[pid] = _Known(info, stat.start, now)
        return _with_cpu(info, stat)

    def scan(self) -> list[ProcessInfo]:
        self.uninspectable = 0
        try:
            pids = [p for p in os.listdir(self.procfs_root) if p.isdigit()]
        except OSError as exc:
            raise OSError(f"cannot list {self.procfs_root}: {exc.strerror}") from None
        found = []
        own = str(os.getpid())
        now = self._clock()
        not_neuron, known, recheck = self._not_neuron, self._known, self.recheck_s
        for pid in pids:
            if pid == own:
                continue
            entry = known.get(pid)
            before = None
            if entry is not None and now - entry.inspected_at < recheck:
                stat = self._stat(pid)
                if stat is not None and stat.start == entry.start:
                    found.append(_with_cpu(entry.info, stat))
                    continue
                del known[pid]  # exited, or the PID now belongs to another process
            elif entry is None:
                before = not_neuron.get(pid)
                if before is not None and now < before.next_at:
                    continue
            info = self._inspect(pid, now, before)
            if info is not None:
                found.append(info)
        if len(known) > len(found):  # forget applications that are gone
            alive = {p.pid for p in found}
            self._known = {pid: k for pid, k in known.items() if k.info.pid in alive}
        if len(not_neuron) > 2 * len(pids) + 64:  # forget processes that are gone
            listed = set(pids)
            self._not_neuron = {pid: t for pid, t in not_neuron.items() if pid in listed}
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


def _with_cpu(info: ProcessInfo, stat: _Stat) -> ProcessInfo:
    return dataclasses.replace(info, cpu_user_s=stat.user_s, cpu_system_s=stat.system_s)
