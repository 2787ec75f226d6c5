"""The daemon's own health figures, shared by the scheduler and the exporters.

The scheduler writes them; exporters read them (Prometheus serves them as self-metrics,
`/ready` uses `last_report_monotonic`).  Everything runs on one event loop, so plain
attributes are enough.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(slots=True)
class GroupStats:
    collections_total: int = 0
    errors_total: int = 0
    last_duration_s: float = 0.0
    last_error: str = ""


@dataclass(slots=True)
class ExporterStats:
    published_total: int = 0
    dropped_total: int = 0
    failures_total: int = 0
    last_error: str = ""


@dataclass(slots=True)
class DaemonStats:
    started_monotonic: float = field(default_factory=time.monotonic)
    groups: dict[str, GroupStats] = field(default_factory=dict)
    exporters: dict[str, ExporterStats] = field(default_factory=dict)
    reports_total: int = 0
    last_report_monotonic: float | None = None
    last_cycle_duration_s: float = 0.0
    shortest_period_s: float = 5.0

    def group(self, name: str) -> GroupStats:
        stats = self.groups.get(name)
        if stats is None:
            stats = self.groups[name] = GroupStats()
        return stats

    def exporter(self, name: str) -> ExporterStats:
        stats = self.exporters.get(name)
        if stats is None:
            stats = self.exporters[name] = ExporterStats()
        return stats

    def report_age_s(self, now: float | None = None) -> float | None:
        if self.last_report_monotonic is None:
            return None
        return (time.monotonic() if now is None else now) - self.last_report_monotonic

    def is_ready(self, now: float | None = None) -> bool:
        """A report younger than three of the shortest periods exists."""
        age = self.report_age_s(now)
        return age is not None and age <= 3 * self.shortest_period_s
