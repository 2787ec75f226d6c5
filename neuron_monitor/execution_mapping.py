"""How the driver's per-core status counters map onto `execution_summary` and `error_summary`.

The driver counts execution outcomes per NeuronCore in `stats/status/<counter>/total`.
The original tool's report groups them into six outcome kinds and six error kinds.  The
mapping below is ours (the original's is not public); the README reproduces it.  A
counter may feed one outcome and one error kind (a NaN result is both
`completed_with_num_err` and a `numerical` error).  Older drivers' `infer_*` names are
aliases of the `execute_*` ones.
"""

from __future__ import annotations

from collections.abc import Mapping

from neuron_monitor.backends.base import CounterSet

# execution_summary field -> driver status counters summed into it
EXECUTION_SUMMARY_SOURCES: Mapping[str, tuple[str, ...]] = {
    "completed": ("success",),
    "completed_with_err": ("execute_completed_with_error", "infer_completed_with_error"),
    "completed_with_num_err": (
        "execute_completed_with_num_error",
        "infer_completed_with_num_error",
    ),
    "timed_out": ("timeout",),
    "incorrect_input": ("exec_bad_input",),
    "failed_to_queue": ("execute_failed_to_queue", "infer_failed_to_queue"),
}

# error_summary field -> driver status counters summed into it
ERROR_SUMMARY_SOURCES: Mapping[str, tuple[str, ...]] = {
    "generic": ("generic_error", "failure"),
    "numerical": ("execute_completed_with_num_error", "infer_completed_with_num_error"),
    "transient": (
        "timeout",
        "execute_failed_to_queue",
        "infer_failed_to_queue",
        "resource_error",
        "resource_nc_error",
        "hw_repairable_hbm_ue_error",
    ),
    "model": ("invalid_error", "unsupported_neff_version", "exec_bad_input", "oob_error"),
    "runtime": (
        "execute_completed_with_error",
        "infer_completed_with_error",
        "execute_sw_nq_overflow",
        "execute_sw_semaphore_error",
        "execute_sw_event_error",
        "execute_sw_psum_collision",
        "execute_sw_sequencer_fatal",
    ),
    "hardware": (
        "hw_error",
        "hw_collectives_error",
        "hw_hbm_ue_error",
        "hw_nc_ue_error",
        "hw_dma_abort_error",
    ),
}

# Every status counter the current driver exposes (SPEC §5), in its order.
STATUS_COUNTERS: tuple[str, ...] = (
    "success",
    "failure",
    "timeout",
    "exec_bad_input",
    "hw_error",
    "execute_completed_with_error",
    "execute_completed_with_num_error",
    "generic_error",
    "resource_error",
    "resource_nc_error",
    "execute_failed_to_queue",
    "invalid_error",
    "unsupported_neff_version",
    "oob_error",
    "hw_collectives_error",
    "hw_hbm_ue_error",
    "hw_nc_ue_error",
    "hw_dma_abort_error",
    "execute_sw_nq_overflow",
    "execute_sw_semaphore_error",
    "execute_sw_event_error",
    "execute_sw_psum_collision",
    "execute_sw_sequencer_fatal",
    "hw_repairable_hbm_ue_error",
)
LEGACY_STATUS_COUNTERS: tuple[str, ...] = (
    "infer_completed_with_error",
    "infer_completed_with_num_error",
    "infer_failed_to_queue",
)


_Plan = tuple[tuple[tuple[str, tuple[int, ...]], ...], tuple[tuple[str, tuple[int, ...]], ...]]
_plans: dict[tuple[str, ...], _Plan] = {}


def _plan(names: tuple[str, ...]) -> _Plan:
    """For one counter listing: the positions summed into each summary field."""
    plan = _plans.get(names)
    if plan is None:
        position = {n: i for i, n in enumerate(names)}

        def fields(sources: Mapping[str, tuple[str, ...]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
            return tuple((f, tuple(position[s] for s in srcs if s in position)) for f, srcs in sources.items())

        if len(_plans) >= 256:  # a few driver listings in practice; bounded regardless
            _plans.clear()
        plan = _plans[names] = (fields(EXECUTION_SUMMARY_SOURCES), fields(ERROR_SUMMARY_SOURCES))
    return plan


def summarize(deltas: Mapping[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """Per-period status counter deltas -> (execution_summary, error_summary) dicts."""
    counters = CounterSet.of(deltas)
    values = counters.counts
    execution_plan, error_plan = _plan(counters.names)
    execution = {f: sum([values[i] for i in idx]) for f, idx in execution_plan}
    errors = {f: sum([values[i] for i in idx]) for f, idx in error_plan}
    return execution, errors
