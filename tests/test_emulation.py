"""The scenario format, the simulation's determinism and consistency, and the emulated backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from neuron_monitor.backends.base import Need
from neuron_monitor.backends.emulated import EmulatedBackend, emulated_identity
from neuron_monitor.backends.scenario import (
    Scenario,
    ScenarioError,
    format_core_list,
    load_scenario,
    parse_core_list,
    parse_scenario,
)
from neuron_monitor.backends.simulation import Simulation
from neuron_monitor.catalogue import INSTANCE_TYPES, instance_type

REPO = Path(__file__).resolve().parent.parent
ALL = frozenset(Need)


def state(sim: Simulation) -> tuple[object, ...]:
    return (
        [(c.busy_us, c.flops, tuple(c.status.values()), tuple(c.device_memory.values())) for c in sim.cores],
        [tuple(d.ecc.values()) for d in sim.devices],
        [(a.cpu_user_s, a.latency_seq, tuple(a.latency_total)) for a in sim.apps],
    )


def test_same_seed_same_state_whatever_the_query_pattern() -> None:
    inst = instance_type("trn1.32xlarge")
    a = Simulation(inst, Scenario(), seed=7, start=0.0)
    b = Simulation(inst, Scenario(), seed=7, start=0.0)
    a.advance_to(30.0)
    for t in (0.05, 1.0, 1.01, 7.3, 29.99, 30.0):
        b.advance_to(t)
    assert state(a) == state(b)
    c = Simulation(inst, Scenario(), seed=8, start=0.0)
    c.advance_to(30.0)
    assert state(a) != state(c)


def test_executions_equal_status_counter_increments() -> None:
    inst = instance_type("trn2.48xlarge")
    sim = Simulation(inst, Scenario(), seed=3, start=0.0)
    sim.advance_to(20.0)
    counted = sum(sum(c.status.values()) for c in sim.cores)
    assert counted == sum(a.executions for a in sim.apps) > 0
    for app in sim.apps:
        physical = {p for lc in app.cores for p in sim.physical_cores_of(lc)}
        assert app.executions == sum(sum(sim.cores[p].status.values()) for p in physical)
        assert all(d <= t for d, t in zip(app.latency_device, app.latency_total, strict=True))
    for core in sim.cores:
        assert 0 <= core.busy_us <= 20.0 * 1e6


@pytest.mark.parametrize("name", list(INSTANCE_TYPES))
def test_every_instance_type_emulates(name: str) -> None:
    backend = EmulatedBackend(name, seed=1, clock=lambda: 0.0)
    snap = backend.snapshot(ALL, 5.0)
    hw = backend.hardware()
    inst = instance_type(name)
    assert hw.device_count == inst.device_count
    assert snap.cores is not None and len(snap.cores) == inst.device_count * hw.physical_cores_per_device
    assert snap.applications is not None and len(snap.applications) == inst.device_count
    assert snap.devices is not None and len(snap.devices) == inst.device_count
    for app in snap.applications:
        assert app.models and app.latency is not None and app.cpu_user_s is not None
        assert {hw.device_of_logical(c) for c in app.cores} == {app.cores[0] // hw.logical_cores_per_device}
    info = emulated_identity(name, 1)
    assert info.instance_type == name and info.instance_id.startswith("i-0") and info.error == ""
    assert info == emulated_identity(name, 1)


def test_snapshot_fills_only_what_is_asked() -> None:
    backend = EmulatedBackend("inf2.xlarge", clock=lambda: 0.0)
    snap = backend.snapshot(frozenset({Need.DEVICES}), 1.0)
    assert snap.cores is None and snap.applications is None and snap.devices is not None
    apps = backend.snapshot(frozenset({Need.APPLICATIONS}), 2.0).applications
    assert apps is not None and apps[0].cpu_user_s is None and apps[0].models is None


def test_applications_start_and_stop() -> None:
    scenario = parse_scenario({"applications": [
        {"tag": "early", "cores": "0", "stop_s": 2.0},
        {"tag": "late", "cores": "1", "start_s": 3.0},
        {"cores": "0-1"}]})
    backend = EmulatedBackend("trn1.2xlarge", scenario=scenario, clock=lambda: 0.0)

    def tags(t: float) -> list[str]:
        apps = backend.snapshot(ALL, t).applications
        assert apps is not None
        return [a.tag for a in apps]

    assert tags(1.0) == ["early", "10014"]  # no tag: the pid is the tag
    assert tags(2.5) == ["10014"]
    assert tags(3.5) == ["late", "10014"]
    sim = backend.simulation
    # memory of the stopped application was freed: only the running ones' models remain on core 0
    assert sim.cores[0].device_memory["constants"] > 0


def test_device_faults_follow_rates() -> None:
    scenario = parse_scenario({"faults": {"ecc_per_hour": {"mem_ecc_uncorrected": 36000},
                                          "error_rates": {"hw_error": 0.5}}})
    sim = Simulation(instance_type("inf2.xlarge"), scenario, seed=1, start=0.0)
    sim.advance_to(10.0)
    assert 50 < sim.devices[0].ecc["mem_ecc_uncorrected"] < 150  # ~100 expected
    hw = sum(c.status["hw_error"] for c in sim.cores)
    ok = sum(c.status["success"] for c in sim.cores)
    assert 0.35 < hw / (hw + ok) < 0.65


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"applicationz": []}, "applicationz: unknown key"),
        ({"applications": [{"cores": "3-1"}]}, "applications[0].cores: invalid core range '3-1'"),
        ({"applications": [{"cores": "x"}]}, "applications[0].cores: invalid core range 'x'"),
        ({"applications": [{"cores": "0", "device": 0}]}, 'give either "cores" or "device"'),
        ({"applications": [{"start_s": 5, "stop_s": 2}]}, "stop_s must be after start_s"),
        ({"faults": {"error_rates": {"success": 0.1}}}, "unknown error counter 'success'"),
        ({"faults": {"error_rates": {"timeout": 2}}}, "must be between 0 and 1"),
        ({"default_models": [{"name": "m", "latency_ms_median": 0}]}, "default_models[0].latency_ms_median"),
        ({"applications": [{"cpu": {"user": -1}}]}, "applications[0].cpu.user"),
    ],
)
def test_scenario_errors_name_the_path(data: object, expected: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data, "s.json")
    assert expected in str(info.value)
    assert str(info.value).startswith("s.json: ")


def test_cores_beyond_the_instance_are_rejected() -> None:
    scenario = parse_scenario({"applications": [{"cores": "0-7"}]})
    with pytest.raises(ScenarioError, match=r"applications\[0\].cores: core 7 does not exist on trn1.2xlarge"):
        EmulatedBackend("trn1.2xlarge", scenario=scenario)
    with pytest.raises(ScenarioError, match="devices 0-0"):
        EmulatedBackend("trn1.2xlarge", scenario=parse_scenario({"applications": [{"device": 1}]}))


def test_shipped_default_scenario_is_the_built_in_one(tmp_path: Path) -> None:
    shipped = load_scenario(REPO / "configs" / "scenarios" / "default.json")
    assert shipped == Scenario()
    bad = tmp_path / "s.json"
    bad.write_text("{")
    with pytest.raises(ScenarioError, match="not valid JSON"):
        load_scenario(bad)
    assert json.loads((REPO / "configs" / "scenarios" / "default.json").read_text())


@given(st.sets(st.integers(min_value=0, max_value=200), min_size=1))
def test_core_list_round_trip(cores: set[int]) -> None:
    ordered = tuple(sorted(cores))
    assert parse_core_list(format_core_list(ordered)) == ordered


@given(st.text(max_size=12))
def test_core_list_parser_never_crashes(text: str) -> None:
    try:
        parsed = parse_core_list(text)
    except ValueError as exc:
        assert str(exc)
    else:
        assert parsed == tuple(sorted(set(parsed)))
