"""`neuron-monitor-cloudwatch`: publish the reports piped in on stdin, as the original
companion script did (`neuron-monitor | neuron-monitor-cloudwatch --namespace NS --region R`).

Malformed lines are logged and skipped; at end of input what is buffered is flushed within
`--flush-deadline`, then the program exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time

from exporters.cloudwatch.options import add_tuning, duration, env_namespace, env_region, flush_interval
from exporters.lines import configure_logging, feed_until_done
from neuron_monitor.selfstats import DaemonStats

log = logging.getLogger("neuron-monitor-cloudwatch")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="neuron-monitor-cloudwatch",
                                     description="Publish neuron-monitor reports read from stdin to CloudWatch.")
    parser.add_argument("--namespace", default=None, help="CloudWatch namespace (default: "
                        "NEURON_MONITOR_CW_NAMESPACE, then NeuronMonitor)")
    parser.add_argument("--region", default=None, help="region (default: NEURON_MONITOR_CW_REGION, then boto3's chain)")
    parser.add_argument("--endpoint-url", default=None)
    parser.add_argument("--flush-deadline", type=duration, default=10.0, metavar="DURATION",
                        help="at end of input or SIGTERM, how long to keep trying to send (default 10s)")
    parser.add_argument("--verbose", type=int, default=2, choices=range(5))
    add_tuning(parser.add_argument_group("tuning"), "")
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> int:
    from exporters.cloudwatch.client import make_put
    from exporters.cloudwatch.metrics import DatumBuilder, Options
    from exporters.cloudwatch.publisher import Publisher

    put, _ = make_put(args.namespace or env_namespace(), args.region or env_region(), args.endpoint_url)
    stats = DaemonStats()
    publisher = Publisher(put, stats.exporter("cloudwatch"),
                          flush_interval_s=flush_interval(args.flush_interval, args.high_resolution),
                          max_buffer=args.buffer, high_resolution=args.high_resolution)
    builder = DatumBuilder(Options(args.per_application, args.per_core, args.per_device))
    publisher.start()
    stats.reports_total = await feed_until_done(
        lambda report: publisher.submit(builder.build(report, time.time())), sys.stdin.buffer)
    await publisher.stop(args.flush_deadline)
    log.info("%d reports, %d requests, %d data points dropped", stats.reports_total, publisher.requests_sent,
             publisher.datums_dropped)
    return 0


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    configure_logging("neuron-monitor-cloudwatch", args.verbose)
    raise SystemExit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
