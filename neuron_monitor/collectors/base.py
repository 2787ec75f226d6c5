"""The two collector shapes: system groups (one object per report) and runtime groups
(one object per application).  Collectors are stateful only in what they remember of
the previous collection (for deltas); they never read files themselves.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

from neuron_monitor.backends.base import AppReading, Need, Snapshot
from neuron_monitor.report import MetricGroup


class SystemCollector(abc.ABC):
    group: str
    needs: frozenset[Need] = frozenset()

    @abc.abstractmethod
    def collect(self, snapshot: Snapshot, period: float) -> MetricGroup:
        """Build the group for this period.  May raise: the scheduler turns it into `error`."""


class RuntimeCollector(abc.ABC):
    group: str
    needs: frozenset[Need] = frozenset({Need.APPLICATIONS})

    @abc.abstractmethod
    def collect(
        self, snapshot: Snapshot, apps: Sequence[AppReading], period: float
    ) -> dict[int, MetricGroup]:
        """Build the group for each application (by pid).  A per-application failure goes
        into that application's group `error`; raising fails the group for all of them."""


def missing_part(snapshot: Snapshot, need: Need, what: str) -> str:
    """The error to report when a part of the snapshot a collector needs is absent."""
    return snapshot.errors.get(need) or f"{what} unavailable"
