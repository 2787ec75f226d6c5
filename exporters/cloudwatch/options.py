"""CloudWatch options shared by the daemon's flags and the pipeline front end."""

from __future__ import annotations

import argparse
import os

from neuron_monitor.durations import DurationError, parse_duration

DEFAULT_NAMESPACE = "NeuronMonitor"


def duration(text: str) -> float:
    try:
        return parse_duration(text)
    except DurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_tuning(group: argparse._ArgumentGroup, prefix: str) -> None:
    group.add_argument(f"--{prefix}per-application", action="store_true",
                       help="also send per-application metrics (RuntimeTag dimension; billed per tag)")
    group.add_argument(f"--{prefix}per-core", action="store_true",
                       help="also send per-NeuronCore utilization (billed per core)")
    group.add_argument(f"--{prefix}per-device", action="store_true",
                       help="also send per-device ECC and memory (billed per device)")
    group.add_argument(f"--{prefix}high-resolution", action="store_true",
                       help="1-second storage resolution (costs more; default 60 s)")
    group.add_argument(f"--{prefix}flush-interval", type=duration, default=None, metavar="DURATION",
                       help="how often to send (default 60s, or 10s with high resolution)")
    group.add_argument(f"--{prefix}buffer", type=int, default=100_000, metavar="N",
                       help="data points kept while CloudWatch is unreachable (oldest dropped beyond; "
                       "default 100000)")


def env_region() -> str | None:
    return os.environ.get("NEURON_MONITOR_CW_REGION") or None


def env_namespace() -> str:
    return os.environ.get("NEURON_MONITOR_CW_NAMESPACE") or DEFAULT_NAMESPACE


def flush_interval(value: float | None, high_resolution: bool) -> float:
    if value is not None:
        return value
    return 10.0 if high_resolution else 60.0
