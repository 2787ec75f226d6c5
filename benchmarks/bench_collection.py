"""How long one full collection of every group takes (issue 2's figure).

Runs the real scheduler, collectors and report model on an emulated instance, advancing a
virtual clock by one period per cycle so that every group is due in every cycle, and
measures the wall and CPU time of each cycle (snapshot + all collectors + report build),
and separately the JSON encoding of the report.

    .venv/bin/python -m benchmarks.bench_collection [--instance trn2.48xlarge] [--cycles 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from neuron_monitor.backends.emulated import EmulatedBackend
from neuron_monitor.config import default_config
from neuron_monitor.daemon import settle_gc
from neuron_monitor.report import InstanceInfo, Report
from neuron_monitor.scheduler import Scheduler
from neuron_monitor.selfstats import DaemonStats


class StepClock:
    def __init__(self) -> None:
        self.t = 10_000.0

    def now(self) -> float:
        return self.t

    async def sleep_until(self, deadline: float, wake: asyncio.Event) -> None:
        self.t = max(self.t, deadline)


async def inline(func: Callable[..., Any], *args: Any) -> Any:
    return func(*args)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def measure(instance: str, cycles: int, period: float) -> dict[str, Any]:
    clock = StepClock()
    backend = EmulatedBackend(instance, seed=1, clock=clock.now)
    reports: list[Report] = []
    scheduler = Scheduler(backend, default_config(period), reports.append, DaemonStats(), InstanceInfo(),
                          clock=clock, offload=inline)
    stop = asyncio.Event()
    stop.set()
    await scheduler.run(stop)  # primes the baseline, then returns at once
    settle_gc()  # as the daemon does once it has started
    wall: list[float] = []
    cpu: list[float] = []
    encode: list[float] = []
    for _ in range(cycles):
        clock.t += period
        for job in scheduler.jobs:
            job.next_due = clock.t
        w0, c0 = time.perf_counter(), time.process_time()
        report = await scheduler.cycle()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
        e0 = time.perf_counter()
        report.to_json_line()
        encode.append(time.perf_counter() - e0)
    last = reports[-1]
    backend.close()
    return {
        "instance": instance,
        "applications": len(last.neuron_runtime_data),
        "cycles": cycles,
        "cycle_wall_ms_median": statistics.median(wall) * 1e3,
        "cycle_wall_ms_p99": pct(wall, 99) * 1e3,
        "cycle_cpu_ms_median": statistics.median(cpu) * 1e3,
        "cycle_cpu_ms_p99": pct(cpu, 99) * 1e3,
        "json_encode_ms_median": statistics.median(encode) * 1e3,
        "report_bytes": len(last.to_json_line()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instance", default="trn2.48xlarge")
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--period", type=float, default=1.0)
    parser.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    args = parser.parse_args()
    result = asyncio.run(measure(args.instance, args.cycles, args.period))
    for key, value in result.items():
        print(f"{key:>24}: {value:.3f}" if isinstance(value, float) else f"{key:>24}: {value}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()
