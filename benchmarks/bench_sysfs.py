"""The sysfs collection cycle against "the floor" (issue 7, items 1 and 2).

Over a tree written by the emulator (trn2.48xlarge: 16 devices x 8 cores, 16 applications as
real processes), it times:
  - the daemon's full cycle: backend snapshot of every part + every collector + the report,
    as the scheduler runs it (all groups due), CPU and wall, median and p99;
  - the floor: the simplest loop reading the same counter files (opened once, pread, int());
and prints their ratio.  `--devices 1,4,16,64` gives the scaling curve.

    .venv/bin/python -m benchmarks.bench_sysfs [--cycles 200] [--devices 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.sysfs_tree import emulated_tree, synthetic
from neuron_monitor.backends.base import Need
from neuron_monitor.backends.sysfs import SysfsBackend
from neuron_monitor.backends.sysfs.files import raise_fd_limit
from neuron_monitor.config import default_config
from neuron_monitor.daemon import settle_gc
from neuron_monitor.report import InstanceInfo
from neuron_monitor.scheduler import Scheduler
from neuron_monitor.selfstats import DaemonStats


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def timed(fn: Callable[[], object], cycles: int) -> tuple[list[float], list[float]]:
    wall, cpu = [], []
    for _ in range(cycles):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return wall, cpu


class Floor:
    """The simplest reader of the same data: descriptors opened once, pread, int()."""

    def __init__(self, sysfs: str, devfs: str) -> None:
        backend = SysfsBackend(sysfs, "/proc", devfs)
        self.paths = backend.counter_paths()  # exactly the files the daemon reads each cycle
        backend.close()
        # Descriptors opened once; past the process's descriptor limit (64 emulated devices have
        # ~16,000 files) the remaining files are opened on each read, as the daemon does.
        self.fds: list[int] = []
        self.uncached: list[str] = []
        budget = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 512 - len(os.listdir("/proc/self/fd"))
        for path in self.paths:
            if len(self.fds) < budget:
                self.fds.append(os.open(path, os.O_RDONLY))
            else:
                self.uncached.append(path)

    def read(self) -> int:
        total = 0
        for fd in self.fds:
            total += int(os.pread(fd, 64, 0))
        for path in self.uncached:
            fd = os.open(path, os.O_RDONLY)
            total += int(os.pread(fd, 64, 0))
            os.close(fd)
        return total

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)


async def _inline(func: Callable[..., Any], *args: Any) -> Any:
    return func(*args)


def measure(devices: int, cycles: int) -> dict[str, Any]:
    raise_fd_limit(1 << 20)  # the tree writer, the backend and the floor all keep files open here
    instance = synthetic("trn2.48xlarge", devices)
    with emulated_tree(instance) as tree:
        backend = SysfsBackend(tree.sysfs, "/proc", tree.devfs)
        clock_t = [1000.0]

        class Clock:
            def now(self) -> float:
                return clock_t[0]

            async def sleep_until(self, deadline: float, wake: asyncio.Event) -> None:
                clock_t[0] = max(clock_t[0], deadline)

        scheduler = Scheduler(backend, default_config(1.0), lambda r: None, DaemonStats(), InstanceInfo(),
                              clock=Clock(), offload=_inline)
        loop = asyncio.new_event_loop()
        stop = asyncio.Event()
        stop.set()
        loop.run_until_complete(scheduler.run(stop))
        settle_gc()  # as the daemon does once it has started

        def cycle() -> None:
            clock_t[0] += 1.0
            for job in scheduler.jobs:
                job.next_due = clock_t[0]
            loop.run_until_complete(scheduler.cycle())

        # Interleaved, so the daemon's cycle and the floor see the same machine (a shared
        # VM's speed drifts by tens of percent within a minute) -- when there are descriptors
        # for both to keep every file open at once; else one after the other (64 devices here).
        needed = len(backend.counter_paths())
        free = resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 512 - len(os.listdir("/proc/self/fd"))
        interleaved = free >= needed
        wall: list[float] = []
        cpu: list[float] = []
        snap_wall: list[float] = []
        floor_wall: list[float] = []
        floor_cpu: list[float] = []

        def daemon_once() -> None:
            w, c = timed(cycle, 1)
            wall.extend(w)
            cpu.extend(c)
            snap_wall.extend(timed(lambda: backend.snapshot(frozenset(Need), clock_t[0]), 1)[0])

        def floor_once(floor: Floor) -> None:
            w, c = timed(floor.read, 1)
            floor_wall.extend(w)
            floor_cpu.extend(c)

        if interleaved:
            floor = Floor(tree.sysfs, tree.devfs)
            for _ in range(cycles):
                daemon_once()
                floor_once(floor)
            backend.close()
        else:
            for _ in range(cycles):
                daemon_once()
            backend.close()  # the floor gets the descriptors the backend had
            floor = Floor(tree.sysfs, tree.devfs)
            for _ in range(cycles):
                floor_once(floor)
        apps = len(scheduler.build_report().neuron_runtime_data)
        result = {
            "devices": devices, "cores": devices * 8, "applications": apps, "files": len(floor.paths),
            "cycle_wall_ms_median": statistics.median(wall) * 1e3, "cycle_wall_ms_p99": pct(wall, 99) * 1e3,
            "cycle_cpu_ms_median": statistics.median(cpu) * 1e3, "cycle_cpu_ms_p99": pct(cpu, 99) * 1e3,
            "snapshot_wall_ms_median": statistics.median(snap_wall) * 1e3,
            "floor_wall_ms_median": statistics.median(floor_wall) * 1e3,
            "floor_cpu_ms_median": statistics.median(floor_cpu) * 1e3,
        }
        result["ratio_cycle_to_floor"] = result["cycle_wall_ms_median"] / result["floor_wall_ms_median"]
        result["ratio_snapshot_to_floor"] = result["snapshot_wall_ms_median"] / result["floor_wall_ms_median"]
        result["floor_uncached_files"] = len(floor.uncached)
        result["interleaved"] = interleaved
        floor.close()
        loop.close()
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--devices", default="16", help="comma-separated device counts, e.g. 1,4,16,64")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    results = [measure(int(d), args.cycles) for d in args.devices.split(",")]
    keys = ["devices", "applications", "files", "cycle_wall_ms_median", "cycle_wall_ms_p99", "cycle_cpu_ms_median",
            "snapshot_wall_ms_median", "floor_wall_ms_median", "ratio_cycle_to_floor", "ratio_snapshot_to_floor"]
    print(" ".join(f"{k:>14}" for k in ["dev", "apps", "files", "cyc med", "cyc p99", "cyc cpu", "snap",
                                         "floor", "cyc/floor", "snap/floor"]))
    for r in results:
        print(" ".join(f"{r[k]:>14.2f}" if isinstance(r[k], float) else f"{r[k]:>14}" for k in keys))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
