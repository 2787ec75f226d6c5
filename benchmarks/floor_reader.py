"""The floor as a process: the simplest loop reading the daemon's counter files once a second.

`bench_daemon` runs it next to the daemon, over the same emulator tree, so the daemon's CPU
can be compared with what merely reading those files costs on the same machine under the
same load (the emulator rewriting them, its applications running).

    .venv/bin/python -m benchmarks.floor_reader SYSFS_ROOT DEVFS_ROOT DURATION_S
"""

from __future__ import annotations

import sys
import time

from benchmarks.bench_sysfs import Floor
from neuron_monitor.backends.sysfs.files import raise_fd_limit


def main() -> None:
    sysfs, devfs, duration = sys.argv[1], sys.argv[2], float(sys.argv[3])
    raise_fd_limit(1 << 20)
    floor = Floor(sysfs, devfs)
    started = time.monotonic()
    tick = started
    while time.monotonic() - started < duration:  # bounded: stops by itself
        floor.read()
        tick += 1.0
        time.sleep(max(0.0, tick - time.monotonic()))
    floor.close()


if __name__ == "__main__":
    main()
