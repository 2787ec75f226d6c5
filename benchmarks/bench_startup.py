"""Start-up time to the first report, and memory, with and without CloudWatch.

    .venv/bin/python -m benchmarks.bench_startup [--runs 5] [--json FILE]

Each run starts the real CLI on an emulated trn2.48xlarge (every group, 1 s), times the
first report line on stdout, then samples RSS after a few seconds of running.  The
CloudWatch runs publish to moto in server mode on loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true", "PYTHONPATH": str(REPO),
       "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_run(extra: list[str], settle_s: float) -> tuple[float, float]:
    cmd = [sys.executable, "-m", "neuron_monitor", "--emulate", "trn2.48xlarge", "-c",
           str(REPO / "configs/all-groups-1s.json"), *extra]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=ENV)
    assert proc.stdout is not None
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready and proc.stdout.readline()
        first = time.perf_counter() - started
        deadline = time.monotonic() + settle_s
        rss = 0
        while time.monotonic() < deadline:  # keep reading so stdout never blocks the daemon
            if select.select([proc.stdout], [], [], 0.2)[0]:
                proc.stdout.readline()
            rss = max(rss, psutil.Process(proc.pid).memory_info().rss)
    finally:
        proc.terminate()
        proc.wait(10)
    return first, rss / 2**20


def measure(runs: int, settle_s: float) -> list[dict[str, Any]]:
    port = free_port()
    moto = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    time.sleep(2)
    results = []
    try:
        for label, extra in (("without CloudWatch", []),
                             ("with CloudWatch (moto)", ["--cloudwatch-namespace", "Bench", "--cloudwatch-region",
                                                         "us-east-1", "--cloudwatch-endpoint-url",
                                                         f"http://127.0.0.1:{port}",
                                                         "--cloudwatch-flush-interval", "2s"])):
            firsts, rsses = zip(*(one_run(extra, settle_s) for _ in range(runs)), strict=True)
            results.append({"case": label, "runs": runs, "first_report_s_median": statistics.median(firsts),
                            "first_report_s_max": max(firsts), "rss_mb_median": statistics.median(rsses),
                            "rss_mb_max": max(rsses)})
    finally:
        moto.terminate()
        moto.wait(10)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--settle", type=float, default=4.0, help="seconds of running before RSS is read")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    results = measure(args.runs, args.settle)
    print(f"{'case':<26} {'first report (median/max)':>28} {'RSS MB (median/max)':>22}")
    for r in results:
        print(f"{r['case']:<26} {r['first_report_s_median']:>12.3f}s / {r['first_report_s_max']:.3f}s "
              f"{r['rss_mb_median']:>12.1f} / {r['rss_mb_max']:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
