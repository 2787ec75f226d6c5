"""Is the daemon's memory bounded under application churn?  Virtual time, so an hour takes a minute.

Runs the scheduler and the Prometheus exposition in-process on an emulated trn1.32xlarge with
the churn scenario (60 applications a minute, each living 4 s), every group at 100 ms and a
scrape every 4 s of emulated time, and prints Python's traced memory and the size of the
label-set cache every 200 s of emulated time.  Memory must stop growing once the bounded
caches are full (the label-set cache holds at most 8,192 entries).

    .venv/bin/python -m benchmarks.bench_memory [--seconds 2400] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import tracemalloc
from pathlib import Path

from benchmarks.bench_collection import StepClock, inline
from exporters.prometheus.exposition import Exposition
from exporters.prometheus.families import _labels
from neuron_monitor.backends.emulated import EmulatedBackend
from neuron_monitor.backends.scenario import load_scenario
from neuron_monitor.config import parse_config
from neuron_monitor.report import InstanceInfo
from neuron_monitor.scheduler import Scheduler
from neuron_monitor.selfstats import DaemonStats

REPO = Path(__file__).resolve().parent.parent
PERIOD_S = 0.1
CONFIG = {"period": "100ms",
          "neuron_runtimes": [{"metrics": [{"type": t} for t in ("neuroncore_counters", "execution_stats",
                                                                  "memory_used", "neuron_runtime_vcpu_usage")]}],
          "system_metrics": [{"type": t} for t in ("neuron_hw_counters", "vcpu_usage", "memory_info")]}


def measure(seconds: float, sample_every_s: float = 200.0) -> list[dict[str, float]]:
    clock = StepClock()
    start = clock.t
    scenario = load_scenario(REPO / "configs/scenarios/app-churn.json")
    backend = EmulatedBackend("trn1.32xlarge", seed=0, scenario=scenario, clock=clock.now)
    stats = DaemonStats()
    exposition = Exposition(stats)
    scheduler = Scheduler(backend, parse_config(CONFIG, "bench_memory"), exposition.update, stats, InstanceInfo(),
                          clock=clock, offload=inline)
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    stop.set()
    loop.run_until_complete(scheduler.run(stop))
    cycles_per_sample = round(sample_every_s / PERIOD_S)
    samples = []
    tracemalloc.start(1)
    try:
        for _ in range(round(seconds / sample_every_s)):
            for i in range(cycles_per_sample):  # bounded: stops by itself
                clock.t += PERIOD_S
                for job in scheduler.jobs:
                    job.next_due = clock.t
                loop.run_until_complete(scheduler.cycle())
                if i % 40 == 0:
                    exposition.body(openmetrics=False, compress=False, now=clock.t)  # a scrape
            gc.collect()
            traced, _ = tracemalloc.get_traced_memory()
            samples.append({"emulated_s": round(clock.t - start), "traced_mib": round(traced / 2**20, 2),
                            "label_cache": _labels.cache_info().currsize})
            print(samples[-1], flush=True)
    finally:
        tracemalloc.stop()
        loop.close()
        backend.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2400.0, help="emulated seconds to run")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    samples = measure(args.seconds)
    if args.json:
        Path(args.json).write_text(json.dumps(samples, indent=2))


if __name__ == "__main__":
    main()
