"""A bounded soak in CI: 100 ms period, application churn, scrapes four times a second.
Memory, descriptors, threads and tasks must stay flat.  (`benchmarks/bench_soak.py` runs
the longer version.)"""

from __future__ import annotations

import json

from benchmarks.bench_soak import soak

DURATION_S = 100.0


def test_soak_stays_flat() -> None:
    result = soak(DURATION_S)
    print(json.dumps(result, indent=1))  # the figures, for the README (pytest -s)
    assert result["stderr_tracebacks"] == 0
    assert result["reports"] > 0.8 * DURATION_S * 10  # it kept reporting every 100 ms
    assert result["applications_seen"] > 0.8 * DURATION_S  # one new application a second came and went
    assert result["rss_mb_end"] - result["rss_mb_start"] < 8.0
    assert result["fds_end"] <= result["fds_start"] + 4 and result["fds_max"] <= result["fds_start"] + 16
    assert result["threads_end"] <= result["threads_start"] + 4
    assert result["tasks_end"] <= result["tasks_start"] + 3 and result["tasks_max"] <= result["tasks_start"] + 8
