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


def summarize(deltas: Mapping[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """Per-period status counter deltas -> (execution_summary, error_summary) dicts."""
    execution = {
        name: sum(deltas.get(src, 0) for src in sources)
        for name, sources in EXECUTION_SUMMARY_SOURCES.items()
    }
    errors = {
        name: sum(deltas.get(src, 0) for src in sources)
        for name, sources in ERROR_SUMMARY_SOURCES.items()
    }
    return execution, errors
