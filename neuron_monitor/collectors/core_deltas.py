"""Per-core counter deltas between two collections of one group."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from neuron_monitor.backends.base import CoreReading
from neuron_monitor.counters import counter_delta


@dataclass(frozen=True, slots=True)
class CoreDelta:
    busy_us: int
    flops: int
    status: dict[str, int]
    error: str = ""


class CoreDeltaTracker:
    """Remembers the previous reading of every core and returns increases since then.

    A core seen for the first time (start-up, a device that came back) has no previous
    reading: its delta is empty rather than its whole lifetime total.
    """

    def __init__(self, with_status: bool = True) -> None:
        self._previous: dict[int, CoreReading] = {}
        self._with_status = with_status  # utilization needs only busy time and flops

    def advance(self, cores: Mapping[int, CoreReading]) -> dict[int, CoreDelta]:
        deltas: dict[int, CoreDelta] = {}
        for index, current in cores.items():
            prev = self._previous.get(index)
            if current.error:
                deltas[index] = CoreDelta(0, 0, {}, current.error)
                continue  # keep the last good reading as the baseline
            if prev is None:
                deltas[index] = CoreDelta(0, 0, {})
            else:
                status: dict[str, int] = {}
                if self._with_status:
                    before = prev.status
                    for name, value in current.status.items():
                        old = before.get(name, value)
                        # the common case inline; drops (resets, wraps) through counter_delta
                        status[name] = value - old if value >= old else counter_delta(old, value)
                deltas[index] = CoreDelta(
                    counter_delta(prev.busy_us, current.busy_us),
                    counter_delta(prev.flops, current.flops),
                    status,
                )
            self._previous[index] = current
        for gone in set(self._previous) - set(cores):
            del self._previous[gone]
        return deltas
