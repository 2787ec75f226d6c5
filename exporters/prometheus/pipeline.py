"""`neuron-monitor-prometheus`: serve the reports piped in on stdin, as the original companion
script did (`neuron-monitor | neuron-monitor-prometheus --port 8000`).

Shares the conversion with the in-process endpoint, so the same reports give the same
series.  Exits 0 at end of input.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import time

from exporters.lines import report_lines
from exporters.prometheus.exposition import Exposition
from exporters.prometheus.options import basic_auth, port_number, tls_files
from exporters.prometheus.server import MetricsServer
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
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    loop.add_signal_handler(signal.SIGINT, done.set)

    async def consume() -> None:
        async for report in report_lines(sys.stdin.buffer):
            exposition.update(report)
            stats.reports_total += 1
            stats.last_report_monotonic = time.monotonic()
            periods = [g.period for g in (report.system_data.vcpu_usage, report.system_data.memory_info,
                                          report.system_data.neuron_hw_counters) if g is not None and g.period > 0]
            if periods:
                stats.shortest_period_s = min(periods)
        log.info("end of input after %d reports", stats.reports_total)

    reader = asyncio.create_task(consume())
    waiter = asyncio.create_task(done.wait())
    await asyncio.wait({reader, waiter}, return_when=asyncio.FIRST_COMPLETED)
    reader.cancel()
    waiter.cancel()
    await server.stop()
    return 0


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    levels = {0: logging.CRITICAL + 10, 1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.DEBUG}
    logging.basicConfig(level=levels[args.verbose], stream=sys.stderr,
                        format="%(asctime)s neuron-monitor-prometheus %(levelname)s: %(message)s")
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
