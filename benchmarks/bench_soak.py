"""Soak: the daemon at a 100 ms period with application churn and constant scraping, for a
bounded time; reports how its memory, descriptors, threads and tasks evolve.

    .venv/bin/python -m benchmarks.bench_soak [--duration 600] [--json FILE]

The CI test (tests/test_soak.py) runs the same for a couple of minutes.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks.bench_scrape import ENV, free_port, wait

REPO = Path(__file__).resolve().parent.parent
WATCHED = ("neuron_monitor_resident_memory_bytes", "neuron_monitor_open_fds", "neuron_monitor_threads",
           "neuron_monitor_asyncio_tasks", "neuron_monitor_reports_total", "neuron_monitor_cpu_seconds_total")


def scrape(port: int, tags: set[str] | None = None) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out = {}
    for name in WATCHED:
        match = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)
        if match:
            out[name] = float(match.group(1))
    found = set(re.findall(r'^neuroncore_utilization_ratio\{.*runtime_tag="([^"]+)"', text, re.M))
    out["runtimes"] = len(found)
    if tags is not None:
        tags.update(found)
    return out


def soak(duration: float, warmup: float = 15.0, scrape_every: float = 0.25) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "fast.json"
        config.write_text(json.dumps({
            "period": "100ms",
            "neuron_runtimes": [{"metrics": [{"type": t} for t in ("neuroncore_counters", "execution_stats",
                                                                      "memory_used", "neuron_runtime_vcpu_usage")]}],
            "system_metrics": [{"type": t} for t in ("neuron_hw_counters", "vcpu_usage", "memory_info")]}))
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "neuron_monitor", "--emulate", "trn1.32xlarge", "--scenario",
             str(REPO / "configs/scenarios/app-churn.json"), "-c", str(config), "--prometheus-port", str(port),
             "--prometheus-address", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
        try:
            wait(f"http://127.0.0.1:{port}/ready")
            deadline = time.monotonic() + warmup
            while time.monotonic() < deadline:
                scrape(port)
                time.sleep(scrape_every)
            first = scrape(port)
            samples = [first]
            scrapes = 0
            tags: set[str] = set()
            end = time.monotonic() + duration
            while time.monotonic() < end:
                sample = scrape(port, tags)
                scrapes += 1
                if scrapes % 20 == 0:
                    samples.append(sample)
                time.sleep(scrape_every)
            last = scrape(port)
            samples.append(last)
            assert proc.poll() is None, "the daemon died during the soak"
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=15)
    rss = [s["neuron_monitor_resident_memory_bytes"] / 2**20 for s in samples]
    return {
        "duration_s": duration, "period_ms": 100, "scrapes": scrapes,
        "reports": last["neuron_monitor_reports_total"] - first["neuron_monitor_reports_total"],
        "rss_mb_start": round(rss[0], 1), "rss_mb_end": round(rss[-1], 1), "rss_mb_max": round(max(rss), 1),
        "fds_start": first["neuron_monitor_open_fds"], "fds_end": last["neuron_monitor_open_fds"],
        "fds_max": max(s["neuron_monitor_open_fds"] for s in samples),
        "threads_start": first["neuron_monitor_threads"], "threads_end": last["neuron_monitor_threads"],
        "tasks_start": first["neuron_monitor_asyncio_tasks"], "tasks_end": last["neuron_monitor_asyncio_tasks"],
        "tasks_max": max(s["neuron_monitor_asyncio_tasks"] for s in samples),
        "cpu_percent": (last["neuron_monitor_cpu_seconds_total"] - first["neuron_monitor_cpu_seconds_total"])
        / duration * 100,
        "applications_seen": len(tags), "stderr_tracebacks": err.count(b"Traceback"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=600.0)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    result = soak(args.duration)
    for key, value in result.items():
        print(f"{key:>24}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
