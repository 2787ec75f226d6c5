"""CPU cost of the device simulation per simulated second (issue 2's budget: well under 10 ms
for 16 applications on trn2.48xlarge, 10 steps per second).

Advances a fresh simulation of the default scenario (one application per device) through
`--seconds` of emulated time and reports process CPU time per simulated second, the best
and the median of `--repeat` runs (the best is the least disturbed by other processes).
It also times one emulated-backend snapshot of every part, which the daemon pays per cycle.

    .venv/bin/python -m benchmarks.bench_simulation [--instance trn2.48xlarge] [--seconds 120]
"""

from __future__ import annotations

import argparse
import statistics
import time

from neuron_monitor.backends.base import Need
from neuron_monitor.backends.emulated import EmulatedBackend
from neuron_monitor.backends.scenario import default_scenario
from neuron_monitor.backends.simulation import STEP_S, Simulation
from neuron_monitor.catalogue import instance_type


def simulate(name: str, seconds: float, seed: int) -> float:
    """CPU milliseconds per simulated second."""
    instance = instance_type(name)
    sim = Simulation(instance, default_scenario(instance), seed=seed, start=0.0)
    began = time.process_time()
    sim.advance_to(seconds)
    return (time.process_time() - began) * 1000.0 / seconds


def snapshot_cost(name: str, samples: int) -> float:
    """CPU milliseconds of one snapshot of every part (simulation advanced one second each)."""
    backend = EmulatedBackend(name, clock=lambda: 0.0)
    needs = frozenset(Need)
    backend.snapshot(needs, 30.0)  # fill the latency windows
    costs = []
    for i in range(samples):
        backend.simulation.advance_to(31.0 + i)
        began = time.process_time()
        backend.snapshot(needs, 31.0 + i)
        costs.append(time.process_time() - began)
    return statistics.median(costs) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instance", default="trn2.48xlarge")
    parser.add_argument("--seconds", type=float, default=120.0, help="simulated seconds per run")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    instance = instance_type(args.instance)
    apps = len(default_scenario(instance).applications or [])
    cores = instance.device_count * instance.architecture.physical_cores_per_device
    runs = [simulate(args.instance, args.seconds, seed) for seed in range(args.repeat)]
    print(f"{args.instance}: {apps} applications, {cores} physical cores, {1 / STEP_S:.0f} steps/s, "
          f"{args.seconds:.0f} s simulated x {args.repeat}")
    print(f"simulation CPU per simulated second: best {min(runs):.2f} ms, median {statistics.median(runs):.2f} ms")
    print(f"emulated snapshot (every part) CPU: median {snapshot_cost(args.instance, 20):.2f} ms")


if __name__ == "__main__":
    main()
