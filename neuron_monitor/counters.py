"""Cumulative counter arithmetic: deltas that never go negative."""

from __future__ import annotations

from collections.abc import Sequence


def counter_delta(previous: int, current: int, bits: int = 64) -> int:
    """The increase of a cumulative counter between two readings.

    A drop is either a wrap (the previous value was in the top quarter of the counter's
    range, so it most likely overflowed) or a reset (driver reload, device reset, a value
    written to the file): after a reset the counter counted up from zero, so the
    increase is the current value.  Never negative.
    """
    if current >= previous:
        return current - previous
    limit = 1 << bits
    if previous >= limit - (limit >> 2) and current < limit:
        return (current - previous) % limit
    return max(current, 0)


def percentiles(samples: Sequence[float], points: Sequence[float]) -> list[float]:
    """Percentiles by linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(samples)
    n = len(ordered)
    if n == 0:
        raise ValueError("no samples")
    out = []
    for p in points:
        rank = (p / 100.0) * (n - 1)
        low = int(rank)
        high = min(low + 1, n - 1)
        frac = rank - low
        out.append(ordered[low] + (ordered[high] - ordered[low]) * frac)
    return out
