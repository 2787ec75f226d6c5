"""`neuron-monitor-prometheus`: serve the reports piped in on stdin, as the original companion
script did (`neuron-monitor | neuron-monitor-prometheus --port 8000`).

Shares the conversion with the in-process endpoint, so the same reports give the same
series.  Exits 0 at end of input.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time

from exporters.lines import configure_logging, feed_until_done
from exporters.prometheus.exposition import Exposition
from exporters.prometheus.options import basic_auth, port_number, tls_files
from exporters.prometheus.server import MetricsServer
from neuron_monitor.report import Report
from neuron_monitor.selfstats import DaemonStats

log = logging.getLogger("neuron-monitor-prometheus")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="neuron-monitor-prometheus",
                                     description="Serve neuron-monitor reports read from stdin to Prometheus.")
    parser.add_argument("-p", "--port", type=port_number, default=8000, help="port (default 8000)")
    parser.add_argument("--address", default="", help="address to listen on (default: every interface)")
    parser.add_argument("--cert-file", help="serve HTTPS with this certificate (PEM), reloaded when it changes")
    parser.add_argument("--key-file", help="private key of --cert-file")
    parser.add_argument("--web-config", help="YAML with basic_auth_users: {user: bcrypt-hash}")
    parser.add_argument("--verbose", type=int, default=2, choices=range(5), help="0 silent .. 4 debug (default 2)")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> int:
    stats = DaemonStats()
    exposition = Exposition(stats)
    server = MetricsServer(exposition, stats, args.address, args.port,
                           tls=tls_files(args.cert_file, args.key_file), auth=basic_auth(args.web_config))
    await server.start()

    def handle(report: Report) -> None:
        exposition.update(report)
        stats.reports_total += 1
        stats.last_report_monotonic = time.monotonic()
        periods = [g.period for g in (report.system_data.vcpu_usage, report.system_data.memory_info,
                                      report.system_data.neuron_hw_counters) if g is not None and g.period > 0]
        if periods:
            stats.shortest_period_s = min(periods)

    await feed_until_done(handle, sys.stdin.buffer)
    await server.stop()
    return 0


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    configure_logging("neuron-monitor-prometheus", args.verbose)
    try:
        status = asyncio.run(serve(args))
    except ValueError as exc:
        print(f"neuron-monitor-prometheus: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except OSError as exc:
        print(f"neuron-monitor-prometheus: error: cannot serve on port {args.port}: {exc.strerror}", file=sys.stderr)
        raise SystemExit(1) from None
    raise SystemExit(status)


if __name__ == "__main__":
    main()
