"""Hypothesis over the config parser: any JSON gives a config or one clear ConfigError, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_monitor.config import ConfigError, load_config, parse_config
from neuron_monitor.report import RUNTIME_GROUPS, SYSTEM_GROUPS

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
periods = st.one_of(st.sampled_from(["1s", "500ms", "2m", "0s", "-1s", "x", ""]), st.integers(), st.none())
metric = st.fixed_dictionaries(
    {"type": st.sampled_from([*RUNTIME_GROUPS, *SYSTEM_GROUPS, "inference_stats", "bogus", 3])},
    optional={"period": periods, "extra": json_values},
)
configs = st.fixed_dictionaries(
    {},
    optional={
        "period": periods,
        "neuron_runtimes": st.lists(st.fixed_dictionaries(
            {"metrics": st.lists(metric, max_size=5)},
            optional={"tag_filter": st.sampled_from([".*", "a|b", "(", "[z-a]", None]), "period": periods}),
            max_size=3),
        "system_metrics": st.lists(metric, max_size=4),
    },
)


def _check(data: object) -> None:
    try:
        config = parse_config(data, "fuzz.json")
    except ConfigError as exc:
        message = str(exc)
        assert message.startswith("fuzz.json: ")
        assert "\n" not in message and len(message) < 400
    else:
        assert all(p > 0 for p in config.all_periods())


@settings(max_examples=400, deadline=None)
@given(configs)
def test_structured_configs(data: dict[str, object]) -> None:
    _check(data)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_arbitrary_json(data: object) -> None:
    _check(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_in_a_file(tmp_path_factory: object, data: bytes) -> None:
    path = Path(str(tmp_path_factory.mktemp("cfg"))) / "c.json"  # type: ignore[attr-defined]
    path.write_bytes(data)
    try:
        load_config(path)
    except ConfigError as exc:
        assert "\n" not in str(exc)


def test_huge_config_is_handled() -> None:
    data = {"neuron_runtimes": [{"tag_filter": f"app{i}", "metrics": [{"type": "memory_used"}]} for i in range(5000)]}
    config = parse_config(json.loads(json.dumps(data)))
    assert len(config.runtimes) == 5000
