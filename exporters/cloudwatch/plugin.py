"""`--cloudwatch-namespace` and friends on the daemon's command line.

Also switched on by `NEURON_MONITOR_CW_REGION` (with `NEURON_MONITOR_CW_NAMESPACE`), as the
original's container images do.  boto3 is imported only in `build()` when it is on.
"""

from __future__ import annotations

import argparse

from exporters.base import Exporter, ExporterContext
from exporters.cloudwatch.options import add_tuning, env_namespace, env_region, flush_interval


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("CloudWatch publishing")
    group.add_argument("--cloudwatch-namespace", metavar="NS",
                       help="publish to CloudWatch under this namespace (also on when NEURON_MONITOR_CW_REGION is set)")
    group.add_argument("--cloudwatch-region", metavar="REGION",
                       help="region (default: NEURON_MONITOR_CW_REGION, then boto3's chain)")
    group.add_argument("--cloudwatch-endpoint-url", metavar="URL", help="endpoint URL (e.g. a VPC endpoint)")
    add_tuning(group, "cloudwatch-")


def build(args: argparse.Namespace, context: ExporterContext) -> Exporter | None:
    region = args.cloudwatch_region or env_region()
    if not args.cloudwatch_namespace and not env_region():
        return None
    namespace = args.cloudwatch_namespace or env_namespace()
    from exporters.cloudwatch.client import make_put
    from exporters.cloudwatch.exporter import CloudWatchExporter
    from exporters.cloudwatch.metrics import Options

    put, _ = make_put(namespace, region, args.cloudwatch_endpoint_url)
    return CloudWatchExporter(
        context, put,
        Options(args.cloudwatch_per_application, args.cloudwatch_per_core, args.cloudwatch_per_device),
        flush_interval_s=flush_interval(args.cloudwatch_flush_interval, args.cloudwatch_high_resolution),
        max_buffer=args.cloudwatch_buffer, high_resolution=args.cloudwatch_high_resolution,
    )
