"""The in-process CloudWatch exporter."""

from __future__ import annotations

import time

from exporters.base import Exporter, ExporterContext
from exporters.cloudwatch.metrics import DatumBuilder, Options
from exporters.cloudwatch.publisher import Publisher, PutFunction
from neuron_monitor.report import Report


class CloudWatchExporter(Exporter):
    name = "cloudwatch"

    def __init__(self, context: ExporterContext, put: PutFunction, options: Options, *,
                 flush_interval_s: float, max_buffer: int, high_resolution: bool) -> None:
        self.builder = DatumBuilder(options)
        self.publisher = Publisher(put, context.stats.exporter(self.name), flush_interval_s=flush_interval_s,
                                   max_buffer=max_buffer, high_resolution=high_resolution)

    async def start(self) -> None:
        self.publisher.start()

    def publish(self, report: Report) -> None:
        # Building data points is cheap; sending happens in the publisher's own time.
        self.publisher.submit(self.builder.build(report, time.time()))

    async def stop(self, grace_s: float) -> None:
        await self.publisher.stop(grace_s)
