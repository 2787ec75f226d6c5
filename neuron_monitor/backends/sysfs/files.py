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
    line = raw.split(b"\n", 1)[0].strip()
    if not line:
        raise ReadError(f"{path}: empty")
    if not line.isdigit():
        shown = line[:24].decode("ascii", "replace")
        raise ReadError(f"{path}: not a counter value: {shown!r}")
    return int(line)


class FileCache:
    """Open descriptors by path; `read()` returns a file's current bytes."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}

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
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
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
