"""The latest exposition, rendered at most once per report and served as bytes.

Each report is *accounted* when it arrives (counters add its new counts: that must happen
for every report), but its series are built and rendered only when the first scrape for it
comes, in the format that scrape asks for, and kept for the scrapes after it.  With a 1 s
report period and Prometheus scraping every 15 s, most reports are never rendered.  The
self-metrics (the daemon's own health: report age, footprint) are a few lines appended to
it and, for gzip, sent as a second gzip member (a gzip stream may hold several members;
HTTP clients read them as one body).  Each whole response body is kept until the next
report, or for at most `SELF_METRICS_TTL_S`, so most scrapes are a lookup.

When scrapes keep up with reports (the last two reports were both served), the next
report is accounted and rendered ahead, in `prepare()`, which runs in the collection
thread: the first scrape of a report then waits for nothing.  That is safe because the
event loop, serving the previous report meanwhile, only reads that report's already built
families and bytes, never the converter that `prepare()` advances.
"""

from __future__ import annotations

import gzip
import time
from dataclasses import dataclass, field

from exporters.prometheus.convert import ReportConverter, instance_label_pairs
from exporters.prometheus.families import (
    CONTENT_TYPE_OPENMETRICS,
    CONTENT_TYPE_TEXT,
    Family,
    labels,
    render_openmetrics,
    render_text,
)
from exporters.prometheus.selfmetrics import self_families
from neuron_monitor.report import Report
from neuron_monitor.selfstats import DaemonStats

GZIP_LEVEL = 5
# How stale the self-metrics in a served body may be (they are sampled at most this often).
SELF_METRICS_TTL_S = 1.0


@dataclass(slots=True)
class _Rendered:
    """The renderings of one report, made on first demand."""

    families: list[Family] | None = None
    # the report's part of a body: (openmetrics, gzip) -> bytes
    statics: dict[tuple[bool, bool], bytes] = field(default_factory=dict)
    served: bool = False  # a scrape asked for this report (rendering ahead does not count)
    # whole bodies, with the self-metrics: (openmetrics, compress) -> (made at, body)
    bodies: dict[tuple[bool, bool], tuple[float, bytes]] = field(default_factory=dict)


class Exposition:
    def __init__(self, stats: DaemonStats) -> None:
        self.stats = stats
        self._converter = ReportConverter()
        self._report: Report | None = None
        self._rendered = _Rendered()
        self._inst = ""
        self.renders = 0  # reports rendered (for tests and the benchmark)
        self.rendered_ahead = 0  # of those, rendered by prepare() (for tests and the benchmark)
        self._streak = 0  # how many reports in a row before the current one were served
        self._accounted: Report | None = None  # accounted by prepare(), not yet by update()
        self._ahead: tuple[Report, _Rendered] | None = None

    def prepare(self, report: Report) -> None:
        """Off the event loop, before `update(report)`: when scrapes keep up with reports,
        account and render `report` now, in the formats the previous report was served in."""
        previous = self._rendered
        if not previous.served or self._streak < 1:
            return  # reports go unscraped: leave it to the first scrape, if any comes
        self._converter.account(report)
        self._accounted = report
        ahead = _Rendered(families=self._converter.families(report))
        # list() copies the keys in one step: a scrape may add a format to `previous` meanwhile
        for openmetrics, compress in list(previous.statics):
            self._static(ahead, openmetrics, compress)
        self._ahead = (report, ahead)

    def update(self, report: Report) -> None:
        if self._accounted is not report:
            self._converter.account(report)
        self._accounted = None
        ahead, self._ahead = self._ahead, None
        self._streak = self._streak + 1 if self._rendered.served else 0
        self._report = report
        self._inst = labels(instance_label_pairs(report))
        if ahead is not None and ahead[0] is report:
            self._rendered = ahead[1]
            self.renders += 1
            self.rendered_ahead += 1
        else:
            self._rendered = _Rendered()

    def _families(self, r: _Rendered) -> list[Family]:
        if r.families is None:
            r.families = self._converter.families(self._report) if self._report is not None else []
            self.renders += 1
        return r.families

    @property
    def series(self) -> int:
        return sum(len(f.samples) for f in self._families(self._rendered))

    def _static(self, r: _Rendered, openmetrics: bool, compress: bool) -> bytes:
        """The report's part of a body, rendered (and compressed) once per format."""
        static = r.statics.get((openmetrics, compress))
        if static is None:
            if compress:
                static = gzip.compress(self._static(r, openmetrics, False), GZIP_LEVEL)
            elif openmetrics:
                static = render_openmetrics(self._families(r), terminate=False).encode()
            else:
                static = render_text(self._families(r)).encode()
            r.statics[(openmetrics, compress)] = static
        return static

    def body(self, openmetrics: bool, compress: bool, now: float | None = None) -> tuple[bytes, str]:
        """The response body and its content type."""
        now = time.monotonic() if now is None else now
        self._rendered.served = True
        ctype = CONTENT_TYPE_OPENMETRICS if openmetrics else CONTENT_TYPE_TEXT
        cached = self._rendered.bodies.get((openmetrics, compress))
        if cached is not None and now - cached[0] < SELF_METRICS_TTL_S:
            return cached[1], ctype
        body = self._make_body(openmetrics, compress)
        self._rendered.bodies[(openmetrics, compress)] = (now, body)
        return body, ctype

    def _make_body(self, openmetrics: bool, compress: bool) -> bytes:
        static = self._static(self._rendered, openmetrics, compress)
        fams = self_families(self.stats, self._inst)
        dynamic = (render_openmetrics(fams) if openmetrics else render_text(fams)).encode()
        return static + (gzip.compress(dynamic, GZIP_LEVEL) if compress else dynamic)
