"""Bad input everywhere, fuzzed: the scenario parser, the report-line readers of both pipeline
front ends, and the sysfs counter parsers.  Never a traceback, always a clear message."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from exporters.lines import parse_report_line
from neuron_monitor.backends.scenario import ScenarioError, parse_scenario
from neuron_monitor.backends.sysfs.files import CounterVector, FileCache, ReadError, parse_counter
from tests.conftest import monitor_command, subprocess_env
from tests.daemon_process import ALL_1S
from tests.prometheus_server import free_port

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=25,
)
scenario_like = st.fixed_dictionaries({}, optional={
    "applications": st.lists(st.fixed_dictionaries({}, optional={
        "tag": st.one_of(st.none(), st.text(max_size=5)), "cores": st.one_of(st.text(max_size=6), st.integers(-2, 40)),
        "device": st.integers(-1, 20), "start_s": st.floats(-1, 10), "stop_s": st.floats(-1, 10)}), max_size=4),
    "events": st.lists(st.fixed_dictionaries({"kind": st.sampled_from(
        ["error_burst", "ecc_storm", "driver_reload", "counter_wrap", "garbage_file", "bogus"])}, optional={
        "at_s": st.floats(-1, 10), "duration_s": st.floats(-1, 10), "device": st.integers(-1, 20),
        "core": st.integers(-1, 9), "counter": st.sampled_from(["timeout", "success", "flop_count", "x"]),
        "rate": st.floats(-1, 2), "per_second": st.floats(-1, 100), "file": st.text(max_size=8),
        "content": st.text(max_size=8)}), max_size=3),
    "churn": st.fixed_dictionaries({}, optional={"applications_per_minute": st.floats(-1, 100),
                                                 "lifetime_s": st.floats(-1, 100)}),
})


@settings(max_examples=300, deadline=None)
@given(st.one_of(json_values, scenario_like))
# found by hypothesis: a lifetime so short that start + lifetime == start in floating point
@example({"churn": {"applications_per_minute": 1.0, "lifetime_s": 3.6389435508479427e-242}})
def test_scenario_parser_never_crashes(data: object) -> None:
    from neuron_monitor.backends.emulated import EmulatedBackend

    try:
        scenario = parse_scenario(data, "fuzz.json")
        EmulatedBackend("trn1.2xlarge", scenario=scenario, clock=lambda: 0.0).snapshot(frozenset(), 1.0)
    except ScenarioError as exc:
        message = str(exc)
        assert message and "\n" not in message and len(message) < 500


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.binary(max_size=300), json_values.map(lambda v: json.dumps(v).encode())))
def test_report_line_parser_never_crashes(line: bytes) -> None:
    try:
        parse_report_line(line)
    except ValueError as exc:
        assert str(exc) and "\n" not in str(exc).strip()


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=40))
def test_counter_parser_accepts_only_driver_values(raw: bytes) -> None:
    try:
        value = parse_counter(raw, "f")
    except ReadError as exc:
        assert str(exc).startswith("f: ")
    else:
        line = raw.partition(b"\n")[0].strip()
        assert line.isdigit() and value == int(line) and b"\n" in raw


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=24), min_size=1, max_size=6))
def test_counter_vector_agrees_with_the_careful_parser(tmp_path: Path, contents: list[bytes]) -> None:
    paths = []
    for i, content in enumerate(contents):
        path = tmp_path / f"c{i}"
        path.write_bytes(content)
        paths.append(str(path))
    cache = FileCache()
    vector = CounterVector(paths, cache)
    try:
        careful: list[int] | None = [parse_counter(c, "x") for c in contents]
    except ReadError:
        careful = None
    for _ in range(2):  # the second read takes the fast path when the first succeeded
        try:
            fast: list[int] | None = vector.read()
        except ReadError:
            fast = None
        assert fast == careful
    cache.close()


def test_pipelines_survive_hostile_input() -> None:
    """Random bytes, truncated JSON, a huge line and wrong types, through both real front ends."""
    daemon = subprocess.run(monitor_command("--once", "--emulate", "inf2.xlarge", "-c", ALL_1S),
                            capture_output=True, env=subprocess_env(), timeout=60, check=True)
    good = daemon.stdout.splitlines()[0]
    hostile = b"\n".join([
        os.urandom(300).replace(b"\n", b" "),
        good[: len(good) // 2],  # truncated JSON
        b'{"neuron_runtime_data": "no", "system_data": 1}',  # wrong types
        b"[" * 100000 + b"]" * 100000,  # deep nesting
        b'{"x": "' + b"a" * (33 * 1024 * 1024) + b'"}',  # longer than the line limit
        good,
    ]) + b"\n"
    prom = subprocess.run([sys.executable, "-m", "exporters.prometheus.pipeline", "--port", str(free_port()),
                           "--address", "127.0.0.1"], input=hostile, capture_output=True, env=subprocess_env(),
                          timeout=120, check=False)
    assert prom.returncode == 0, prom.stderr[-2000:]
    assert b"Traceback" not in prom.stderr and prom.stderr.count(b"skipped") == 5
    from tests.cloudwatch_servers import moto_server

    with moto_server() as moto:
        cw = subprocess.run([sys.executable, "-m", "exporters.cloudwatch.pipeline", "--namespace", "Fuzz",
                             "--region", "us-east-1", "--endpoint-url", moto, "--flush-interval", "1h"],
                            input=hostile, capture_output=True, env=subprocess_env(), timeout=120, check=False)
    assert cw.returncode == 0, cw.stderr[-2000:]
    assert b"Traceback" not in cw.stderr and cw.stderr.count(b"skipped") == 5
    assert io.BytesIO(hostile).read(1)
