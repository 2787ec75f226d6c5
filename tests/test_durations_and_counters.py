from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neuron_monitor.counters import counter_delta, percentiles
from neuron_monitor.durations import DurationError, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("500ms", 0.5), ("1s", 1.0), ("2m", 120.0), ("1h", 3600.0), ("1m30s", 90.0), ("1.5s", 1.5), (" 5s ", 5.0)],
)
def test_parse_duration_examples(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "s", "-1s", "1 s", "1d", "0s", "0ms", "1s2", "abc", "1.s"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(DurationError):
        parse_duration(text)


@given(st.integers(min_value=1, max_value=10**9))
def test_duration_round_trip(ms: int) -> None:
    text = format_duration(ms / 1000)
    assert parse_duration(text) == pytest.approx(ms / 1000)


@given(st.text(max_size=12))
def test_parse_duration_never_crashes_otherwise(text: str) -> None:
    try:
        value = parse_duration(text)
    except DurationError as exc:
        assert str(exc)
    else:
        assert value > 0


@given(st.integers(min_value=0, max_value=2**64 - 1), st.integers(min_value=0, max_value=2**40))
def test_counter_delta_is_the_increase(start: int, increase: int) -> None:
    current = start + increase
    if current < 2**64:
        assert counter_delta(start, current) == increase


@given(st.integers(min_value=0, max_value=2**64 - 1), st.integers(min_value=0, max_value=2**64 - 1))
def test_counter_delta_never_negative(previous: int, current: int) -> None:
    assert counter_delta(previous, current) >= 0


@given(st.integers(min_value=2**64 - 2**20, max_value=2**64 - 1), st.integers(min_value=0, max_value=2**20))
def test_counter_wrap_counts_across_the_overflow(previous: int, current: int) -> None:
    assert counter_delta(previous, current) == current + (2**64 - previous)


@given(st.integers(min_value=1000, max_value=2**62), st.integers(min_value=0, max_value=999))
def test_counter_reset_counts_from_zero(previous: int, current: int) -> None:
    # A drop far from the top of the range is a reset: the counter restarted at zero.
    assert counter_delta(previous, current) == current


def test_32_bit_counters_wrap_at_2_32() -> None:
    assert counter_delta(2**32 - 2, 3, bits=32) == 5


def test_percentiles_interpolate() -> None:
    assert percentiles([1.0, 2.0, 3.0, 4.0], [0, 50, 100]) == [1.0, 2.5, 4.0]
    with pytest.raises(ValueError, match="no samples"):
        percentiles([], [50])
