"""/metrics latency on loopback: neuron-monitor's endpoint on an emulated trn2.48xlarge (16
applications, every group every second), compared in the same run with the original-style
prometheus_client exporter on the same report and with Debian's prometheus-node-exporter.

    .venv/bin/python -m benchmarks.bench_scrape [--requests 400] [--json FILE]

Every server runs in its own process; the client scrapes with 1 and with 10 concurrent
scrapers for at least 5 s each (several report periods), bounded in requests and time.

The client is `wrk` (Debian's package, installed by scripts/setup.sh) when it is there: a
Python client on this 2-core machine saturates its own core first and then measures mostly
its own event loop (its latencies swing by 2x between identical runs).  Without wrk the
aiohttp client below is used, and the table says which client measured.

A control row runs neuron-monitor with every period at one hour (no collection while it
is scraped): the difference to the first row is what collecting costs the scrapes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true", "PYTHONPATH": str(REPO)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 - loopback
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def scrape(url: str, concurrency: int, requests: int, min_seconds: float = 5.0) -> dict[str, float]:
    """Scrape with `concurrency` clients until `requests` were made *and* `min_seconds` went by
    (bounded by both: at most 20 x `requests`), so the window spans several report periods:
    a few hundred requests take a fraction of a second and may miss every collection."""
    latencies: list[float] = []
    size = 0
    headers = {"Accept-Encoding": "identity"}
    started = time.perf_counter()
    cap = 20 * requests
    async with aiohttp.ClientSession() as session:
        async def worker() -> None:
            nonlocal size
            while len(latencies) < cap and (len(latencies) < requests
                                            or time.perf_counter() - started < min_seconds):
                start = time.perf_counter()
                async with session.get(url, headers=headers) as resp:
                    body = await resp.read()
                latencies.append(time.perf_counter() - start)
                size = len(body)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {"median_ms": statistics.median(latencies) * 1e3, "p99_ms": pct(latencies, 99) * 1e3,
            "bytes": size, "requests": len(latencies), "seconds": round(time.perf_counter() - started, 2)}


WRK_PERCENTILE = re.compile(r"^\s*(50|99)(?:\.0+)?%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE)
UNIT_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def wrk_scrape(url: str, concurrency: int, seconds: float) -> dict[str, float]:
    """One bounded `wrk` run: `concurrency` connections for `seconds` (wrk stops by itself)."""
    out = subprocess.run(["wrk", "-t1", f"-c{concurrency}", f"-d{max(1, round(seconds))}s", "--latency",
                          "-H", "Accept-Encoding: identity", url],
                         capture_output=True, text=True, timeout=seconds + 30, check=True).stdout
    found = {p: float(v) * UNIT_MS[u] for p, v, u in WRK_PERCENTILE.findall(out)}
    requests = re.search(r"(\d+) requests in", out)
    if "50" not in found or "99" not in found or requests is None:
        raise RuntimeError(f"unexpected wrk output:\n{out}")
    with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - loopback
        size = len(resp.read())
    return {"median_ms": found["50"], "p99_ms": found["99"], "bytes": size,
            "requests": int(requests.group(1)), "seconds": seconds}


def client() -> str:
    return "wrk" if shutil.which("wrk") else "aiohttp"


def count_series(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - loopback
        return sum(1 for line in resp.read().splitlines() if line and not line.startswith(b"#"))


def measure(name: str, url: str, requests: int, seconds: float = 5.0) -> dict[str, Any]:
    if client() == "wrk":
        one, ten = wrk_scrape(url, 1, seconds), wrk_scrape(url, 10, seconds)
    else:
        one = asyncio.run(scrape(url, 1, requests, seconds))
        ten = asyncio.run(scrape(url, 10, requests, seconds))
    return {"server": name, "client": client(), "series": count_series(url), "bytes": one["bytes"],
            "c1_median_ms": one["median_ms"], "c1_p99_ms": one["p99_ms"],
            "c10_median_ms": ten["median_ms"], "c10_p99_ms": ten["p99_ms"]}


def start_daemon(config: Path, stdout: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuron_monitor", "--emulate", "trn2.48xlarge", "-c", str(config),
         "--prometheus-port", str(port), "--prometheus-address", "127.0.0.1"],
        stdout=open(stdout, "wb"), env=ENV)  # noqa: SIM115 - the child owns it
    wait(f"http://127.0.0.1:{port}/ready")
    time.sleep(2.5)
    return proc, port


def idle_config(tmp: Path) -> Path:
    """configs/all-groups-1s.json with every period at one hour: no collection while scraped."""
    config = json.loads((REPO / "configs/all-groups-1s.json").read_text())
    config["period"] = "3600s"
    path = tmp / "idle.json"
    path.write_text(json.dumps(config))
    return path


def run(requests: int) -> list[dict[str, Any]]:
    results = []
    procs: list[subprocess.Popen[bytes]] = []
    tmp = Path(tempfile.mkdtemp())
    try:
        proc, port = start_daemon(REPO / "configs/all-groups-1s.json", tmp / "reports.jsonl")
        procs.append(proc)
        results.append(measure("neuron-monitor", f"http://127.0.0.1:{port}/metrics", requests))
        report = (tmp / "reports.jsonl").read_bytes().splitlines()[-1]
        (tmp / "report.json").write_bytes(report)
        proc.terminate()
        proc.wait(10)
        proc, port = start_daemon(idle_config(tmp), tmp / "idle.jsonl")
        procs.append(proc)
        results.append(measure("neuron-monitor, not collecting (control)", f"http://127.0.0.1:{port}/metrics",
                               requests))
        proc.terminate()
        proc.wait(10)
        base_port = free_port()
        procs.append(subprocess.Popen([sys.executable, "-m", "benchmarks.original_style_exporter", str(base_port),
                                       str(tmp / "report.json")], env=ENV))
        wait(f"http://127.0.0.1:{base_port}/metrics")
        time.sleep(1.5)
        results.append(measure("original-style (prometheus_client)", f"http://127.0.0.1:{base_port}/metrics",
                               requests))
        node = shutil.which("prometheus-node-exporter") or "/usr/bin/prometheus-node-exporter"
        if os.path.exists(node):
            node_port = free_port()
            procs.append(subprocess.Popen([node, f"--web.listen-address=127.0.0.1:{node_port}"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait(f"http://127.0.0.1:{node_port}/metrics")
            results.append(measure("prometheus-node-exporter", f"http://127.0.0.1:{node_port}/metrics", requests))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def table(results: list[dict[str, Any]]) -> str:
    head = f"{'server':<42} {'series':>7} {'bytes':>8} {'c1 med':>8} {'c1 p99':>8} {'c10 med':>8} {'c10 p99':>8}"
    lines = [head, "-" * len(head)]
    for r in results:
        lines.append(f"{r['server']:<42} {r['series']:>7} {r['bytes']:>8} {r['c1_median_ms']:>7.2f}m "
                     f"{r['c1_p99_ms']:>7.2f}m {r['c10_median_ms']:>7.2f}m {r['c10_p99_ms']:>7.2f}m")
    lines.append(f"(client: {results[0]['client'] if results else client()})")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    results = run(args.requests)
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
