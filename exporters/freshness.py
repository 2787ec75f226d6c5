"""Telling a new collection of a group from the same one repeated in the next report.

Exporters that add per-period counts into totals (Prometheus counters, CloudWatch counts)
must count each collection once.  In the daemon, groups carry the number of the collection
that produced them; a report parsed from JSON (the pipelines) does not, and there a group is
taken as new when its content differs from the last one counted (its measured `period`
alone practically never repeats).
"""

from __future__ import annotations

from collections.abc import Hashable

from neuron_monitor.report import MetricGroup


class FreshnessTracker:
    def __init__(self) -> None:
        self._seen: dict[Hashable, int | str] = {}

    def is_new(self, key: Hashable, group: MetricGroup) -> bool:
        marker: int | str = group.collection or group.model_dump_json()
        if self._seen.get(key) == marker:
            return False
        self._seen[key] = marker
        return True

    def forget_except(self, keys: set[Hashable]) -> None:
        for key in [k for k in self._seen if k not in keys]:
            del self._seen[key]
