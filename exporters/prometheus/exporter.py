"""The in-process Prometheus exporter: keeps the exposition of the latest report."""

from __future__ import annotations

from exporters.base import Exporter, ExporterContext
from exporters.prometheus.auth import BasicAuth
from exporters.prometheus.exposition import Exposition
from exporters.prometheus.options import TlsFiles
from exporters.prometheus.server import MetricsServer
from neuron_monitor.report import Report


class PrometheusExporter(Exporter):
    name = "prometheus"

    def __init__(self, context: ExporterContext, address: str, port: int, tls: TlsFiles | None = None,
                 auth: BasicAuth | None = None) -> None:
        self.stats = context.stats.exporter(self.name)
        self.exposition = Exposition(context.stats)
        self.server = MetricsServer(self.exposition, context.stats, address, port, tls=tls, auth=auth)

    async def start(self) -> None:
        await self.server.start()

    def prepare(self, report: Report) -> None:
        self.exposition.prepare(report)

    def publish(self, report: Report) -> None:
        # Accounting (unless prepare() did it); the first scrape renders it (see Exposition).
        self.exposition.update(report)
        self.stats.published_total += 1

    async def stop(self, grace_s: float) -> None:
        await self.server.stop()
