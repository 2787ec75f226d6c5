from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_monitor.config import ConfigError, default_config, load_config, parse_config
from neuron_monitor.report import RUNTIME_GROUPS, SYSTEM_GROUPS

REPO = Path(__file__).resolve().parent.parent
DOC_EXAMPLE = {
    "period": "1s",
    "neuron_runtimes": [{"tag_filter": ".*", "metrics": [
        {"type": "neuroncore_counters"}, {"type": "memory_used"},
        {"type": "neuron_runtime_vcpu_usage"}, {"type": "execution_stats"}]}],
    "system_metrics": [{"type": "vcpu_usage"}, {"type": "memory_info"},
                       {"period": "2s", "type": "neuron_hw_counters"}],
}


def test_documented_example_resolves_periods() -> None:
    config = parse_config(DOC_EXAMPLE)
    assert config.system_groups == {"vcpu_usage": 1.0, "memory_info": 1.0, "neuron_hw_counters": 2.0}
    assert config.groups_for_tag("anything") == dict.fromkeys(RUNTIME_GROUPS, 1.0)


def test_period_inheritance_innermost_wins() -> None:
    config = parse_config({"period": "10s", "neuron_runtimes": [
        {"period": "3s", "metrics": [{"type": "memory_used"}, {"type": "execution_stats", "period": "500ms"}]},
        {"metrics": [{"type": "neuroncore_counters"}]}],
        "system_metrics": [{"type": "memory_info"}]})
    assert config.groups_for_tag("x") == {"memory_used": 3.0, "execution_stats": 0.5, "neuroncore_counters": 10.0}
    assert config.system_groups == {"memory_info": 10.0}


def test_default_period_is_five_seconds() -> None:
    config = parse_config({"system_metrics": [{"type": "memory_info"}]})
    assert config.system_groups == {"memory_info": 5.0}


def test_no_config_means_every_group_every_five_seconds() -> None:
    config = default_config()
    assert config.system_groups == dict.fromkeys(SYSTEM_GROUPS, 5.0)
    assert config.groups_for_tag("1234") == dict.fromkeys(RUNTIME_GROUPS, 5.0)


def test_several_entries_union_with_shortest_period() -> None:
    config = parse_config({"neuron_runtimes": [
        {"tag_filter": "train.*", "period": "1s", "metrics": [{"type": "neuroncore_counters"}]},
        {"tag_filter": ".*", "period": "5s", "metrics": [{"type": "neuroncore_counters"}, {"type": "memory_used"}]},
        {"tag_filter": "infer", "metrics": [{"type": "execution_stats"}]}]})
    assert config.groups_for_tag("train-1") == {"neuroncore_counters": 1.0, "memory_used": 5.0}
    assert config.groups_for_tag("infer") == {"neuroncore_counters": 5.0, "memory_used": 5.0, "execution_stats": 5.0}
    # tag filters match the whole tag
    assert "execution_stats" not in config.groups_for_tag("infer-2")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"periood": "1s"}, "periood: unknown key"),
        ({"neuron_runtimes": [{"metrics": [{"type": "memory_used", "perid": "1s"}]}]},
         "neuron_runtimes[0].metrics[0].perid: unknown key"),
        ({"neuron_runtimes": [{"metrics": [{"type": "inference_stats"}]}]},
         'neuron_runtimes[0].metrics[0].type: "inference_stats" was renamed to "execution_stats"'),
        ({"system_metrics": [{"type": "hw_counters"}]}, '"hw_counters" was renamed to "neuron_hw_counters"'),
        ({"neuron_runtimes": [{"metrics": [{"type": "nc_counters"}]}]}, "renamed to \"neuroncore_counters\""),
        ({"system_metrics": [{"type": "gpu_stats"}]},
         'system_metrics[0].type: unknown metric group "gpu_stats"; valid system groups: neuron_hw_counters'),
        ({"system_metrics": [{"type": "memory_used"}]}, "is not a system group"),
        ({"period": "0s"}, "period: duration '0s' must be greater than zero"),
        ({"period": "-1s"}, "period: invalid duration '-1s'"),
        ({"period": "fast"}, "period: invalid duration 'fast'"),
        ({"period": 5}, "period: Input should be a valid string"),
        ({"neuron_runtimes": [{"tag_filter": "([", "metrics": []}]}, "neuron_runtimes[0].tag_filter: invalid regular"),
        ({"neuron_runtimes": [{"metrics": [{}]}]}, "neuron_runtimes[0].metrics[0].type: required field is missing"),
        ({"neuron_runtimes": {"metrics": []}}, "neuron_runtimes: Input should be a valid list"),
        ({"system_metrics": [{"type": "memory_info"}, {"type": "memory_info"}]}, "listed twice"),
        ([], "the config must be a JSON object"),
    ],
)
def test_each_config_error_names_field_and_reason(data: object, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data, "cfg.json")
    message = str(info.value)
    assert message.startswith("cfg.json: ")
    assert expected in message
    assert "\n" not in message


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"period": "1s",\n  "system_metrics": [}')
    with pytest.raises(ConfigError, match=r"invalid JSON at line 2 column"):
        load_config(bad)
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(binary)


@pytest.mark.parametrize("name", ["monitor.json", "all-groups-1s.json", "minimal.json"])
def test_shipped_configs_are_valid(name: str) -> None:
    config = load_config(REPO / "configs" / name)
    assert config.all_periods()


def test_all_groups_config_enables_everything_at_one_second() -> None:
    config = load_config(REPO / "configs" / "all-groups-1s.json")
    assert config.system_groups == dict.fromkeys(SYSTEM_GROUPS, 1.0)
    assert config.groups_for_tag("t") == dict.fromkeys(RUNTIME_GROUPS, 1.0)
    assert json.loads((REPO / "configs" / "monitor.json").read_text()) == DOC_EXAMPLE
