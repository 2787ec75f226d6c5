"""Status counters as vectors: the fast path must give exactly what name-by-name
arithmetic gives, including resets, wraps and a counter listing that changes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from neuron_monitor.backends.base import EMPTY_COUNTERS, CoreReading, CounterSet
from neuron_monitor.collectors.core_deltas import CoreDeltaTracker, status_delta, vector_delta
from neuron_monitor.collectors.execution import sum_counters
from neuron_monitor.counters import counter_delta
from neuron_monitor.execution_mapping import STATUS_COUNTERS, summarize

NAMES = ("success", "failure", "timeout")


def test_a_counter_set_is_a_read_only_mapping() -> None:
    counters = CounterSet(NAMES, (5, 1, 0))
    assert counters == {"success": 5, "failure": 1, "timeout": 0}
    assert dict(counters) == {"success": 5, "failure": 1, "timeout": 0}
    assert list(counters.values()) == [5, 1, 0] and len(counters) == 3
    assert counters["failure"] == 1 and counters.get("nope", 7) == 7 and "timeout" in counters
    assert CounterSet.of(counters) is counters
    assert CounterSet.of({"a": 1}).names == ("a",)
    assert not EMPTY_COUNTERS
    try:
        CounterSet(NAMES, (1, 2))
    except ValueError as exc:
        assert "3 names for 2 values" in str(exc)
    else:
        raise AssertionError("a length mismatch must be refused")


u64 = st.integers(min_value=0, max_value=2**64 - 1)


@given(st.lists(st.tuples(u64, u64), min_size=1, max_size=30))
def test_vector_delta_equals_counter_delta_elementwise(pairs: list[tuple[int, int]]) -> None:
    previous = tuple(p for p, _ in pairs)
    current = tuple(c for _, c in pairs)
    assert vector_delta(previous, current) == tuple(counter_delta(p, c) for p, c in pairs)


def test_a_wrap_and_a_reset_in_one_vector() -> None:
    top = 2**64 - 10
    # success wrapped past 2^64 by 15; failure was reset to 0 and counted 3; timeout moved by 2
    assert vector_delta((top, 500, 7), (5, 3, 9)) == (15, 3, 2)


def test_a_changed_listing_is_matched_by_name() -> None:
    before = CounterSet(("success", "failure"), (10, 1))
    after = CounterSet(("failure", "success", "timeout"), (2, 15, 4))
    delta = status_delta(before, after)
    # a counter seen for the first time counts from now on, never its lifetime total
    assert dict(delta) == {"failure": 1, "success": 5, "timeout": 0}


def test_tracker_accepts_plain_dicts_and_counter_sets() -> None:
    tracker = CoreDeltaTracker()
    tracker.advance({0: CoreReading(0, 0, 100, 10, {"success": 1, "failure": 0})})
    deltas = tracker.advance({0: CoreReading(0, 0, 250, 30, CounterSet(("success", "failure"), (4, 2)))})
    assert (deltas[0].busy_us, deltas[0].flops, dict(deltas[0].status)) == (150, 20, {"success": 3, "failure": 2})


def test_sum_over_cores_with_one_or_several_listings() -> None:
    a = CounterSet(NAMES, (1, 2, 3))
    b = CounterSet(NAMES, (10, 20, 30))
    assert sum_counters([a, b]) == {"success": 11, "failure": 22, "timeout": 33}
    c = CounterSet(("timeout", "oob_error"), (5, 1))
    assert sum_counters([a, c]) == {"success": 1, "failure": 2, "timeout": 8, "oob_error": 1}
    assert sum_counters([]) == {}


@given(st.lists(st.integers(min_value=0, max_value=1000), min_size=len(STATUS_COUNTERS),
                max_size=len(STATUS_COUNTERS)), st.permutations(STATUS_COUNTERS))
def test_summaries_do_not_depend_on_the_listing_order(counts: list[int], order: list[str]) -> None:
    by_name = dict(zip(STATUS_COUNTERS, counts, strict=True))
    listed = CounterSet(tuple(order), tuple(by_name[n] for n in order))
    assert summarize(listed) == summarize(dict(by_name))
    execution, errors = summarize(listed)
    assert execution["completed"] == by_name["success"]
    assert errors["hardware"] == sum(by_name[n] for n in ("hw_error", "hw_collectives_error", "hw_hbm_ue_error",
                                                          "hw_nc_ue_error", "hw_dma_abort_error"))
