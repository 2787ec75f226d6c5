"""Per-core counter deltas between two collections of one group."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from operator import sub

from neuron_monitor.backends.base import EMPTY_COUNTERS, CoreReading, CounterSet
from neuron_monitor.counters import counter_delta


@dataclass(slots=True)  # not frozen: a frozen __init__ costs a setattr call per field, per core per cycle
class CoreDelta:
    busy_us: int
    flops: int
    status: CounterSet  # per-period increase of each status counter
    error: str = ""


def vector_delta(previous: tuple[int, ...], current: tuple[int, ...]) -> tuple[int, ...]:
    """Element-wise increases; the subtraction runs in C, drops (resets, wraps) go
    through `counter_delta` only when one is seen."""
    deltas = tuple(map(sub, current, previous))
    if deltas and min(deltas) < 0:
        deltas = tuple(map(counter_delta, previous, current))
    return deltas


def status_delta(previous: CounterSet, current: CounterSet) -> CounterSet:
    if current.names == previous.names:  # the common case: the same driver listing
        return CounterSet(current.names, vector_delta(previous.counts, current.counts))
    # The listing changed (driver upgrade, a counter appeared): name by name; a counter
    # seen for the first time counts from this reading on.
    before = dict(zip(previous.names, previous.counts, strict=True))
    return CounterSet(current.names, tuple(
        counter_delta(before.get(name, value), value) for name, value in zip(current.names, current.counts,
                                                                             strict=True)))


class CoreDeltaTracker:
    """Remembers the previous reading of every core and returns increases since then.

    A core seen for the first time (start-up, a device that came back) has no previous
    reading: its delta is empty rather than its whole lifetime total.
    """

    def __init__(self, with_status: bool = True) -> None:
        self._previous: dict[int, tuple[int, int, CounterSet]] = {}
        self._with_status = with_status  # utilization needs only busy time and flops

    def advance(self, cores: Mapping[int, CoreReading]) -> dict[int, CoreDelta]:
        deltas: dict[int, CoreDelta] = {}
        previous = self._previous
        with_status = self._with_status
        of = CounterSet.of
        for index, current in cores.items():
            if current.error:
                deltas[index] = CoreDelta(0, 0, EMPTY_COUNTERS, current.error)
                continue  # keep the last good reading as the baseline
            busy, flops = current.busy_us, current.flops
            status = of(current.status) if with_status else EMPTY_COUNTERS
            prev = previous.get(index)
            if prev is None:
                deltas[index] = CoreDelta(0, 0, EMPTY_COUNTERS)
            else:
                prev_busy, prev_flops, prev_status = prev
                # the common case inline; drops (resets, wraps) through counter_delta
                deltas[index] = CoreDelta(
                    busy - prev_busy if busy >= prev_busy else counter_delta(prev_busy, busy),
                    flops - prev_flops if flops >= prev_flops else counter_delta(prev_flops, flops),
                    status_delta(prev_status, status) if with_status else EMPTY_COUNTERS,
                )
            previous[index] = (busy, flops, status)
        if len(previous) != len(cores):
            for gone in set(previous) - set(cores):
                del previous[gone]
        return deltas
