"""Steady-state cost of the whole daemon (issue 7, item 4) and the pipeline's ingest rate (item 5).

Runs `neuron-monitor-emulator` for a trn2.48xlarge (16 devices x 8 cores, 16 application
processes) and the real daemon on its tree through the sysfs backend, every group every
second, Prometheus on and scraped every 5 s by this harness (bounded: `--duration`), with and
without CloudWatch (moto on loopback).  CPU is the daemon process's own user+system time over
the window, as percent of one core; RSS is sampled every second.

    .venv/bin/python -m benchmarks.bench_daemon [--duration 60]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

from benchmarks.bench_scrape import ENV, free_port, wait

REPO = Path(__file__).resolve().parent.parent


def floor_cpu(root: str, duration: float) -> dict[str, Any]:
    """CPU of the floor (the same files read once a second by the simplest loop), as a
    process beside the emulator, over the same kind of window as the daemon's."""
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.floor_reader", f"{root}/sys", f"{root}/dev",
                             str(duration + 5)], env=ENV)
    try:
        time.sleep(3)  # past its start-up
        ps = psutil.Process(proc.pid)
        start_cpu, started = ps.cpu_times(), time.monotonic()
        time.sleep(duration)
        end_cpu, elapsed = ps.cpu_times(), time.monotonic() - started
        used = (end_cpu.user - start_cpu.user) + (end_cpu.system - start_cpu.system)
        return {"cpu_percent_one_core": used / elapsed * 100, "seconds": round(elapsed, 1)}
    finally:
        proc.terminate()
        proc.wait(10)


def run_daemon(root: str, duration: float, extra: list[str]) -> dict[str, Any]:
    port = free_port()
    cmd = [sys.executable, "-m", "neuron_monitor", "--backend", "sysfs", "--sysfs-path", f"{root}/sys",
           "--procfs-path", "/proc", "--devfs-path", f"{root}/dev", "-c", str(REPO / "configs/all-groups-1s.json"),
           "--prometheus-port", str(port), "--prometheus-address", "127.0.0.1", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    try:
        wait(f"http://127.0.0.1:{port}/ready")
        time.sleep(3)  # past start-up
        ps = psutil.Process(proc.pid)
        start_cpu = ps.cpu_times()
        started = time.monotonic()
        rss: list[float] = []
        scrapes = 0
        next_scrape = started
        while time.monotonic() - started < duration:
            if time.monotonic() >= next_scrape:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                    resp.read()
                scrapes += 1
                next_scrape += 5
            rss.append(ps.memory_info().rss / 2**20)
            time.sleep(1)
        end_cpu = ps.cpu_times()
        elapsed = time.monotonic() - started
        used = (end_cpu.user - start_cpu.user) + (end_cpu.system - start_cpu.system)
        return {"cpu_percent_one_core": used / elapsed * 100, "rss_mb_median": statistics.median(rss),
                "rss_mb_max": max(rss), "seconds": round(elapsed, 1), "scrapes": scrapes}
    finally:
        proc.terminate()
        proc.wait(10)


def pipeline_rate(lines: int = 300) -> float:
    """Reports per second neuron-monitor-prometheus ingests from stdin (trn2.48xlarge reports)."""
    report = subprocess.run([sys.executable, "-m", "neuron_monitor", "--once", "--emulate", "trn2.48xlarge", "-c",
                             str(REPO / "configs/all-groups-1s.json")], capture_output=True, env=ENV, check=True,
                            timeout=60).stdout
    port = free_port()
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "exporters.prometheus.pipeline", "--port", str(port), "--address",
                           "127.0.0.1", "--verbose", "0"], input=report * lines, env=ENV, check=True, timeout=300)
    assert proc.returncode == 0
    return lines / (time.perf_counter() - started)


def measure(duration: float) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="nm-daemon-") as root:
        emulator = subprocess.Popen([sys.executable, "-m", "neuron_monitor.emulator.main", "--instance-type",
                                     "trn2.48xlarge", "--root", root, "--tick", "1s", "--cpu-scale", "0.02",
                                     "--duration", f"{int(duration * 3 + 120)}s"], env=ENV,
                                    stderr=subprocess.DEVNULL)
        try:
            while not os.path.exists(f"{root}/emulator.json"):
                time.sleep(0.1)
            time.sleep(2)
            results["floor: the same files read once a second"] = floor_cpu(root, duration)
            results["sysfs, Prometheus"] = run_daemon(root, duration, [])
            moto_port = free_port()
            moto = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p",
                                     str(moto_port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
            try:
                time.sleep(2)
                results["sysfs, Prometheus, CloudWatch"] = run_daemon(
                    root, duration, ["--cloudwatch-namespace", "Bench", "--cloudwatch-region", "us-east-1",
                                     "--cloudwatch-endpoint-url", f"http://127.0.0.1:{moto_port}",
                                     "--cloudwatch-flush-interval", "10s"])
            finally:
                moto.terminate()
                moto.wait(10)
        finally:
            emulator.send_signal(signal.SIGTERM)
            emulator.wait(20)
    results["pipeline_reports_per_second"] = pipeline_rate()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    results = measure(args.duration)
    for name, value in results.items():
        print(f"{name}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
