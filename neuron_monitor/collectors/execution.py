"""`execution_stats`: per-period execution outcomes, errors and latency percentiles.

Counts come from the driver's per-core status counters summed over the application's
cores (so the executions counted here are exactly the ones the core counters moved);
latencies come from the backend's latency window when it has one, else `null`.
"""

from __future__ import annotations

from collections.abc import Sequence

from neuron_monitor.backends.base import EMPTY_COUNTERS, AppReading, CounterSet, Need, Snapshot
from neuron_monitor.collectors.base import RuntimeCollector, missing_part
from neuron_monitor.collectors.core_deltas import CoreDelta, CoreDeltaTracker
from neuron_monitor.counters import percentiles
from neuron_monitor.execution_mapping import summarize
from neuron_monitor.report import (
    PERCENTILES,
    ErrorSummary,
    ExecutionStats,
    ExecutionSummary,
    LatencyPercentiles,
    LatencyStats,
    MetricGroup,
)

_POINTS = tuple(float(p[1:]) for p in PERCENTILES)


def sum_counters(parts: Sequence[CounterSet]) -> CounterSet:
    """The sum of several cores' counters: column by column when the cores share one
    listing (always, on one driver), name by name otherwise."""
    if not parts:
        return EMPTY_COUNTERS
    names = parts[0].names
    if all(part.names == names for part in parts):
        return CounterSet(names, tuple(map(sum, zip(*(part.counts for part in parts), strict=True))))
    totals: dict[str, int] = {}
    for part in parts:
        for name, value in zip(part.names, part.counts, strict=True):
            totals[name] = totals.get(name, 0) + value
    return CounterSet.of(totals)


def latency_percentiles(samples: Sequence[float]) -> LatencyPercentiles | None:
    if not samples:
        return None
    values = percentiles(samples, _POINTS)
    return LatencyPercentiles(**{name: round(v, 9) for name, v in zip(PERCENTILES, values, strict=True)})


class ExecutionStatsCollector(RuntimeCollector):
    group = "execution_stats"
    needs = frozenset({Need.APPLICATIONS, Need.CORES, Need.APP_LATENCY})

    def __init__(self) -> None:
        self._tracker = CoreDeltaTracker()
        self._latency_seq: dict[int, int] = {}

    def collect(
        self, snapshot: Snapshot, apps: Sequence[AppReading], period: float
    ) -> dict[int, MetricGroup]:
        if snapshot.cores is None:
            error = missing_part(snapshot, Need.CORES, "core counters")
            return {app.pid: ExecutionStats(period=period, error=error) for app in apps}
        deltas = self._tracker.advance(snapshot.cores)
        out: dict[int, MetricGroup] = {app.pid: self._for_app(snapshot, app, deltas, period) for app in apps}
        live = {app.pid for app in apps}
        for pid in set(self._latency_seq) - live:
            del self._latency_seq[pid]
        return out

    def _for_app(
        self, snapshot: Snapshot, app: AppReading, deltas: dict[int, CoreDelta], period: float
    ) -> ExecutionStats:
        errors: list[str] = []
        physical = sorted({p for lc in app.cores for p in snapshot.hardware.physical_cores_of(lc)})
        counted: list[CounterSet] = []
        for p in physical:
            delta = deltas.get(p)
            if delta is None:
                errors.append(f"core {p}: no counters")
                continue
            if delta.error:
                errors.append(delta.error)
            if delta.status:
                counted.append(delta.status)
        execution, error_kinds = summarize(sum_counters(counted))
        latency = LatencyStats()
        if app.latency is not None:
            first_sight = app.pid not in self._latency_seq
            since = self._latency_seq.get(app.pid, app.latency.end_seq)
            total, device = app.latency.since(since)
            self._latency_seq[app.pid] = app.latency.end_seq
            if not first_sight:
                latency = LatencyStats(
                    total_latency=latency_percentiles(total), device_latency=latency_percentiles(device)
                )
        return ExecutionStats(
            period=period,
            error_summary=ErrorSummary(**error_kinds),
            execution_summary=ExecutionSummary(**execution),
            latency_stats=latency,
            error="; ".join(dict.fromkeys(errors)),
        )
