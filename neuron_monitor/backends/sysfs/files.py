"""Cheap repeated reads of small sysfs files.

Each counter file is opened once and re-read with `os.pread` at offset 0, which the
kernel answers by regenerating the attribute: one syscall per value instead of
open+read+close.  A descriptor whose file went away (device removed, driver reloaded)
fails with ENOENT/ENODEV/ESTALE; it is closed and the path re-opened once.  (On a tree of
regular files, such as the emulator's, a deleted file stays readable through an open
descriptor; the backend closes a device's descriptors when its folder disappears.)
"""

from __future__ import annotations

import contextlib
import errno
import os

_STALE = {errno.ENOENT, errno.ENODEV, errno.ESTALE, errno.ENXIO, errno.EBADF}
MAX_VALUE_BYTES = 128


class ReadError(Exception):
    """A file that could not be read or parsed; str() says which and why."""


def parse_counter(raw: bytes, path: str) -> int:
    """The driver writes "%llu\\n" (or "%u\\n"/"%d"): the first line must be a non-negative integer."""
    line, newline, _ = raw.partition(b"\n")
    line = line.strip()
    if not line:
        raise ReadError(f"{path}: empty")
    if not newline:  # the driver always ends the value with a newline: this one was cut short
        raise ReadError(f"{path}: truncated value {line[:24].decode('ascii', 'replace')!r}")
    if not line.isdigit():
        shown = line[:24].decode("ascii", "replace")
        raise ReadError(f"{path}: not a counter value: {shown!r}")
    return int(line)


def _read_once(path: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise ReadError(f"{path}: {exc.strerror}") from None
    try:
        return os.pread(fd, MAX_VALUE_BYTES, 0)
    except OSError as exc:
        raise ReadError(f"{path}: {exc.strerror}") from None
    finally:
        os.close(fd)


class FileCache:
    """Open descriptors by path; `read()` returns a file's current bytes.

    A trn2.48xlarge has ~4,000 counter files read each cycle.  At most `max_open` stay open (the daemon
    raises its descriptor limit at start-up; see `raise_fd_limit`); past that, or when the
    process runs out of descriptors, files are opened and closed on each read instead.
    """

    def __init__(self, max_open: int = 16384) -> None:
        self._fds: dict[str, int] = {}
        self.max_open = max_open

    def __len__(self) -> int:
        return len(self._fds)

    def read(self, path: str) -> bytes:
        fd = self._fds.get(path)
        if fd is not None:
            try:
                return os.pread(fd, MAX_VALUE_BYTES, 0)
            except OSError as exc:
                self._drop(path)
                if exc.errno not in _STALE:
                    raise ReadError(f"{path}: {exc.strerror}") from None
        if len(self._fds) >= self.max_open:
            return _read_once(path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                self.max_open = len(self._fds)  # stop caching: stay below the limit from now on
                return _read_once(path)
            raise ReadError(f"{path}: {exc.strerror}") from None
        self._fds[path] = fd
        try:
            return os.pread(fd, MAX_VALUE_BYTES, 0)
        except OSError as exc:
            self._drop(path)
            raise ReadError(f"{path}: {exc.strerror}") from None

    def read_counter(self, path: str) -> int:
        return parse_counter(self.read(path), path)

    def read_text(self, path: str) -> str:
        return self.read(path).decode("utf-8", "replace").strip()

    def forget_under(self, prefix: str) -> None:
        """Close every descriptor below a folder (a device that went away)."""
        for path in [p for p in self._fds if p.startswith(prefix)]:
            self._drop(path)

    def _drop(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        for path in list(self._fds):
            self._drop(path)


def raise_fd_limit(wanted: int = 65536) -> int:
    """Raise the soft descriptor limit towards the hard one (the default 1,024 is too few
    to keep every counter file of a large instance open).  Returns the new soft limit."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            return target
        except (ValueError, OSError):
            return soft
    return soft


class CounterVector:
    """A fixed list of counter files read together, as fast as the simplest loop can.

    The common case is one list comprehension of `int(os.pread(fd, ...))` over descriptors
    opened once: that is the floor the benchmark compares with.  Anything unusual (a file
    not open yet, gone, garbage) falls back to reading file by file through the cache,
    which names the culprit in a ReadError.
    """

    __slots__ = ("_cache", "_fds", "paths")

    def __init__(self, paths: list[str], cache: FileCache) -> None:
        self.paths = paths
        self._cache = cache
        self._fds: list[int] | None = None

    def read(self) -> list[int]:
        fds = self._fds
        if fds is not None:
            try:
                raws = [os.pread(fd, MAX_VALUE_BYTES, 0) for fd in fds]
                values = [int(raw) for raw in raws]
            except (OSError, ValueError):
                self._fds = None  # re-validate file by file below
            else:
                # int() also takes "-5", "+5" and "1_000": those are not driver values.
                # Each value must also end with the driver's newline (else it was cut short).
                joined = b"".join(raws)
                if (b"-" not in joined and b"+" not in joined and b"_" not in joined
                        and joined.count(b"\n") == len(raws)):
                    return values
                self._fds = None
        values = [self._cache.read_counter(p) for p in self.paths]
        if all(p in self._cache._fds for p in self.paths):
            self._fds = [self._cache._fds[p] for p in self.paths]
        return values

    def forget(self) -> None:
        self._fds = None
