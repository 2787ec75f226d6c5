"""The scenario format: core lists, validation errors that name the JSON path, checks against
an instance type, the built-in default and the shipped default file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from neuron_monitor.backends.scenario import (
    ERROR_COUNTERS,
    Scenario,
    ScenarioError,
    default_scenario,
    format_core_list,
    load_scenario,
    parse_core_list,
    parse_scenario,
    validate_for_all_instance_types,
)
from neuron_monitor.catalogue import INSTANCE_TYPES, instance_type

REPO = Path(__file__).resolve().parent.parent
DEFAULT_FILE = REPO / "configs" / "scenarios" / "default.json"
README = REPO / "configs" / "scenarios" / "README.md"


# --- core lists ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cores"),
    [("0-3", (0, 1, 2, 3)), ("4,5", (4, 5)), ("0-1,6", (0, 1, 6)), (" 7 , 2-3 ", (2, 3, 7)), ("3,3,1-3", (1, 2, 3))],
)
def test_core_lists_parse(text: str, cores: tuple[int, ...]) -> None:
    assert parse_core_list(text) == cores


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "empty core list"), ("3-1", "invalid core range '3-1'"), ("x", "expected N or N-M"),
     ("1,,2", "invalid core range ''"), ("-1", "invalid core range '-1'"), ("0-99999", "too large")],
)
def test_bad_core_lists_say_which_part(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_core_list(text)


@given(st.sets(st.integers(min_value=0, max_value=300), min_size=1))
def test_core_list_round_trip(cores: set[int]) -> None:
    ordered = tuple(sorted(cores))
    text = format_core_list(ordered)
    assert parse_core_list(text) == ordered
    assert format_core_list(parse_core_list(text)) == text  # the collapsed form is canonical


@given(st.text(alphabet="0123456789-, x", max_size=16))
def test_core_list_parser_accepts_or_explains(text: str) -> None:
    try:
        parsed = parse_core_list(text)
    except ValueError as exc:
        assert str(exc)
    else:
        assert parsed == tuple(sorted(set(parsed))) and all(c >= 0 for c in parsed)


# --- validation errors: one per class, each naming the path --------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # unknown keys, at the top and deep down
        ({"applicationz": []}, "applicationz: unknown key"),
        ({"applications": [{"models": [{"name": "m", "latency": 3}]}]},
         "applications[0].models[0].latency: unknown key"),
        # wrong types
        ({"applications": [{"cores": 2.5}]}, "applications[0].cores: "),
        ({"applications": [{"tag": 5}]}, "applications[0].tag: Input should be a valid string"),
        ({"faults": {"ecc_per_hour": {"mem_ecc_corrected": "often"}}}, "faults.ecc_per_hour.mem_ecc_corrected: "),
        # values out of range
        ({"default_models": {"trn1": [{"name": "m", "latency_ms_median": 0}]}},
         "default_models.trn1[0].latency_ms_median: Input should be greater than 0"),
        ({"applications": [{"cpu": {"user": -1}}]}, "applications[0].cpu.user: Input should be greater than or equal"),
        ({"applications": [{"models": [{"name": "m", "device_share": 1.5}]}]},
         "applications[0].models[0].device_share"),
        ({"applications": [{"cores": 0}]}, "applications[0].cores: a core count must be at least 1"),
        ({"applications": [{"tag": "x" * 256}]}, "applications[0].tag: String should have at most 255"),
        # bad core lists
        ({"applications": [{"cores": "3-1"}]}, "applications[0].cores: invalid core range '3-1'"),
        # fields that contradict each other
        ({"applications": [{"cores": "0", "device": 0}]}, 'applications[0]: give either "cores" or "device"'),
        ({"applications": [{"start_s": 5, "stop_s": 2}]}, "applications[0]: stop_s must be after start_s"),
        # error rates
        ({"faults": {"error_rates": {"success": 0.1}}}, "faults.error_rates: unknown error counter 'success'"),
        ({"faults": {"error_rates": {"timeout": 2}}}, "faults.error_rates: rate of 'timeout' must be between 0 and 1"),
        ({"faults": {"error_rates": {"timeout": 0.6, "hw_error": 0.6}}}, "error rates add up to more than 1"),
        ({"applications": [{"error_rates": {"nope": 0.1}}]}, "applications[0].error_rates: unknown error counter"),
        # families
        ({"default_models": {"trn3": []}}, "default_models.trn3"),
    ],
)
def test_scenario_errors_name_the_path(data: object, expected: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data, "s.json")
    message = str(info.value)
    assert message.startswith("s.json: ")
    assert expected in message
    assert "\n" not in message


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read scenario file"):
        load_scenario(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ScenarioError, match="not valid JSON"):
        load_scenario(bad)
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"faults": {"timeout_busy_s": -1}}')
    with pytest.raises(ScenarioError, match=re.escape(f"{wrong}: faults.timeout_busy_s")):
        load_scenario(wrong)


# --- checks against an instance type --------------------------------------------------------


def resolve(data: dict[str, Any], instance: str) -> list[tuple[int, ...]]:
    return [cores for _, cores in parse_scenario(data).resolved_applications(instance_type(instance))]


def test_cores_beyond_the_instance_are_rejected() -> None:
    with pytest.raises(ScenarioError, match=re.escape(
            "applications[1].cores: core 7 does not exist on trn1.2xlarge (logical cores 0-1)")):
        resolve({"applications": [{"cores": "0"}, {"cores": "1,7"}]}, "trn1.2xlarge")
    with pytest.raises(ScenarioError, match=re.escape("applications[0].device: trn1.2xlarge has devices 0-0")):
        resolve({"applications": [{"device": 1}]}, "trn1.2xlarge")
    with pytest.raises(ScenarioError, match=re.escape("applications[0].cores: 3 cores asked for, but only 2")):
        resolve({"applications": [{"cores": 3}]}, "trn1.2xlarge")
    # trn2 counts logical cores: 4 per device, 64 in all
    assert resolve({"applications": [{"cores": "63"}]}, "trn2.48xlarge") == [(63,)]
    with pytest.raises(ScenarioError, match="core 64 does not exist"):
        resolve({"applications": [{"cores": "64"}]}, "trn2.48xlarge")


def test_core_counts_take_the_lowest_cores_nobody_names() -> None:
    data = {"applications": [{"cores": 2}, {"cores": "1-2"}, {"cores": 3}, {"device": 3}]}
    assert resolve(data, "inf1.6xlarge") == [(0, 3), (1, 2), (4, 5, 6), (12, 13, 14, 15)]


def test_two_applications_may_not_share_a_core_at_the_same_time() -> None:
    with pytest.raises(ScenarioError, match=re.escape(
            "applications[1].cores: core 1 is also used by applications[0] while both run")):
        resolve({"applications": [{"cores": "0-1"}, {"cores": "1-2"}]}, "inf2.24xlarge")
    with pytest.raises(ScenarioError, match="core 0 is also used"):
        resolve({"applications": [{}, {"device": 0}]}, "inf2.xlarge")  # no placement: every core
    # one after the other is fine
    assert resolve({"applications": [{"cores": "0-1", "stop_s": 10}, {"cores": "1", "start_s": 10}]},
                   "inf2.xlarge") == [(0, 1), (1,)]


def test_models_must_fit_in_the_cores_memory() -> None:
    big = {"name": "huge", "device_memory": {"constants": 3 * 1024**3}}
    with pytest.raises(ScenarioError, match=re.escape("applications[0].models: the models need 3.57 GiB")):
        resolve({"applications": [{"cores": "0", "models": [big]}]}, "inf1.xlarge")
    assert resolve({"applications": [{"cores": "0", "models": [big]}]}, "inf2.xlarge") == [(0,)]
    with pytest.raises(ScenarioError, match=re.escape("default_models.inf1: the models need")):
        resolve({"default_models": {"inf1": [big]}}, "inf1.xlarge")


# --- the default ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(INSTANCE_TYPES))
def test_default_is_one_application_per_device_on_all_its_cores(name: str) -> None:
    instance = instance_type(name)
    scenario = default_scenario(name)
    assert scenario.applications is not None and len(scenario.applications) == instance.device_count
    resolved = scenario.resolved_applications(instance)
    arch = instance.architecture
    per_device = arch.physical_cores_per_device // (arch.default_logical_core_config or 1)
    for device, (app, cores) in enumerate(resolved):
        assert cores == tuple(range(device * per_device, (device + 1) * per_device))
        assert app.tag and len(scenario.models_for(app, instance)) >= 2
    # what the file (no applications) resolves to is the same
    assert Scenario().resolved_applications(instance) == resolved


def test_default_counts() -> None:
    assert len(default_scenario("trn2.48xlarge").applications or []) == 16
    assert len(default_scenario("trn1.32xlarge").applications or []) == 16
    trn = [m.name for m in Scenario().default_models["trn2"]]
    inf = [m.name for m in Scenario().default_models["inf1"]]
    assert any("llama" in n for n in trn) and any("bert" in n for n in inf)


def test_default_error_rates_cover_every_error_counter() -> None:
    rates = Scenario().faults.error_rates
    assert set(rates) == set(ERROR_COUNTERS)
    assert all(0 < r < 1e-3 for r in rates.values())
    assert all(rate > 0 for _, rate in Scenario().faults.ecc_per_hour)


def test_shipped_default_file_is_the_built_in_default() -> None:
    shipped = load_scenario(DEFAULT_FILE)
    assert shipped == Scenario()
    data = json.loads(DEFAULT_FILE.read_text())
    assert "applications" not in data  # instance-type independent
    assert validate_for_all_instance_types(shipped) == {}


def test_a_partial_default_models_keeps_the_other_families() -> None:
    custom = parse_scenario({"default_models": {"inf2": [{"name": "only"}]}})
    assert [m.name for m in custom.default_models["inf2"]] == ["only"]
    assert custom.default_models["trn2"] == Scenario().default_models["trn2"]


def field_names(model: type[BaseModel]) -> set[str]:
    names: set[str] = set()
    for name, info in model.model_fields.items():
        names.add(name)
        for candidate in _model_types(info.annotation):
            names |= field_names(candidate)
    return names


def _model_types(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in getattr(annotation, "__args__", ()):
        found += _model_types(arg)
    return found


def test_readme_documents_every_field() -> None:
    text = README.read_text()
    missing = sorted(name for name in field_names(Scenario) if f"`{name}`" not in text)
    assert missing == []
