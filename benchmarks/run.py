"""The performance harness: one command, one table, one JSON file (issue 7).

    .venv/bin/python -m benchmarks.run [--quick] [--json benchmarks/results/latest.json]

Runs, on this machine and in this order: the in-process emulated collection cycle; the sysfs
cycle against the pread floor for 1, 4, 16 and 64 emulated devices; /metrics latency for
neuron-monitor, an original-style prometheus_client exporter and Debian's node exporter;
the daemon's steady-state CPU and RSS (sysfs backend, Prometheus scraped every 5 s, with and
without CloudWatch); start-up time and RSS with and without CloudWatch; the pipeline's
ingest rate.  Every load loop is bounded and runs on loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import psutil

from benchmarks import bench_collection, bench_daemon, bench_scrape, bench_startup, bench_sysfs


def machine() -> dict[str, Any]:
    return {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "memory_gib": round(psutil.virtual_memory().total / 2**30, 1), "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d")}


def run(quick: bool) -> dict[str, Any]:
    cycles = 60 if quick else 300
    out: dict[str, Any] = {"machine": machine()}
    out["collection_emulated"] = asyncio.run(bench_collection.measure("trn2.48xlarge", cycles, 1.0))
    out["collection_sysfs"] = [bench_sysfs.measure(d, cycles // 2 if d == 64 else cycles) for d in (1, 4, 16, 64)]
    out["scrape"] = bench_scrape.run(200 if quick else 1000)
    out["daemon"] = bench_daemon.measure(15 if quick else 60)
    out["startup"] = bench_startup.measure(2 if quick else 5, 3.0)
    return out


def table(r: dict[str, Any]) -> str:
    m = r["machine"]
    lines = [f"machine: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, Python {m['python']}, {m['date']}",
             "", "collection cycle, trn2.48xlarge, 16 applications, every group"]
    e = r["collection_emulated"]
    lines.append(f"  emulated in-process      wall median {e['cycle_wall_ms_median']:.2f} ms  p99 "
                 f"{e['cycle_wall_ms_p99']:.2f} ms  cpu median {e['cycle_cpu_ms_median']:.2f} ms")
    lines.append(f"  {'devices':>8} {'files':>6} {'cycle med':>10} {'cycle p99':>10} {'cpu med':>8} "
                 f"{'snapshot':>9} {'floor':>7} {'cycle/floor':>12} {'snap/floor':>11}")
    for s in r["collection_sysfs"]:
        lines.append(f"  {s['devices']:>8} {s['files']:>6} {s['cycle_wall_ms_median']:>8.2f}ms "
                     f"{s['cycle_wall_ms_p99']:>8.2f}ms {s['cycle_cpu_ms_median']:>6.2f}ms "
                     f"{s['snapshot_wall_ms_median']:>7.2f}ms {s['floor_wall_ms_median']:>5.2f}ms "
                     f"{s['ratio_cycle_to_floor']:>12.2f} {s['ratio_snapshot_to_floor']:>11.2f}")
    lines += ["", "/metrics (1 and 10 concurrent scrapers)", bench_scrape.table(r["scrape"]), "",
              "daemon, steady state (sysfs, every group at 1 s, Prometheus scraped every 5 s)"]
    floor = next((d for name, d in r["daemon"].items() if name.startswith("floor")), None)
    for name, d in r["daemon"].items():
        if isinstance(d, dict) and "rss_mb_median" in d:
            vs_floor = f"   ({d['cpu_percent_one_core'] / floor['cpu_percent_one_core']:.2f} x the floor)" \
                if floor else ""
            lines.append(f"  {name:<32} CPU {d['cpu_percent_one_core']:.2f} % of a core   "
                         f"RSS {d['rss_mb_median']:.1f} MB (max {d['rss_mb_max']:.1f}){vs_floor}")
    if floor:
        lines.append(f"  {'floor (same files, 1/s, a loop)':<32} CPU {floor['cpu_percent_one_core']:.2f} % of a core")
    lines.append(f"  pipeline ingest (neuron-monitor-prometheus): {r['daemon']['pipeline_reports_per_second']:.0f} "
                 "trn2.48xlarge reports/s")
    lines += ["", "start-up to the first report"]
    for s in r["startup"]:
        lines.append(f"  {s['case']:<26} {s['first_report_s_median']:.3f} s (max {s['first_report_s_max']:.3f})  "
                     f"RSS {s['rss_mb_median']:.1f} MB")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer cycles and shorter windows")
    parser.add_argument("--json", default="benchmarks/results/latest.json")
    args = parser.parse_args()
    results = run(args.quick)
    text = table(results)
    print(text)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=2))
    Path(args.json).with_suffix(".txt").write_text(text + "\n")  # the table, as printed


if __name__ == "__main__":
    main()
