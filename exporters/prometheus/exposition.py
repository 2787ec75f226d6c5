"""The latest exposition, rendered once per report and served as bytes.

Report-derived series are rendered when a report arrives (in both formats, gzip made on
first request); the self-metrics are a few lines rendered per scrape and, for gzip, sent
as a second gzip member (a gzip stream may hold several members; HTTP clients read them
as one body).
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass

from exporters.prometheus.convert import ReportConverter, instance_label_pairs
from exporters.prometheus.families import (
    CONTENT_TYPE_OPENMETRICS,
    CONTENT_TYPE_TEXT,
    labels,
    render_openmetrics,
    render_text,
)
from exporters.prometheus.selfmetrics import self_families
from neuron_monitor.report import Report
from neuron_monitor.selfstats import DaemonStats

GZIP_LEVEL = 5


@dataclass(slots=True)
class _Rendered:
    text: bytes = b""
    openmetrics: bytes = b""
    text_gz: bytes | None = None
    openmetrics_gz: bytes | None = None
    series: int = 0


class Exposition:
    def __init__(self, stats: DaemonStats) -> None:
        self.stats = stats
        self._converter = ReportConverter()
        self._rendered = _Rendered()
        self._inst = ""

    @property
    def series(self) -> int:
        return self._rendered.series

    def update(self, report: Report) -> None:
        families = self._converter.convert(report)
        self._inst = labels(instance_label_pairs(report))
        self._rendered = _Rendered(
            text=render_text(families).encode(),
            openmetrics=render_openmetrics(families, terminate=False).encode(),
            series=sum(len(f.samples) for f in families),
        )

    def body(self, openmetrics: bool, compress: bool) -> tuple[bytes, str]:
        """The response body and its content type."""
        r = self._rendered
        fams = self_families(self.stats, self._inst)
        if openmetrics:
            static, dynamic = r.openmetrics, render_openmetrics(fams).encode()
            ctype = CONTENT_TYPE_OPENMETRICS
        else:
            static, dynamic = r.text, render_text(fams).encode()
            ctype = CONTENT_TYPE_TEXT
        if not compress:
            return static + dynamic, ctype
        if openmetrics:
            if r.openmetrics_gz is None:
                r.openmetrics_gz = gzip.compress(static, GZIP_LEVEL)
            head = r.openmetrics_gz
        else:
            if r.text_gz is None:
                r.text_gz = gzip.compress(static, GZIP_LEVEL)
            head = r.text_gz
        return head + gzip.compress(dynamic, GZIP_LEVEL), ctype
