"""The simulation: deterministic whatever the query pattern, and numbers that agree with each
other (executions = status counter increments, busy time within wall time, memory = the sum
of what is loaded), for every instance type, with applications coming and going."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_monitor.backends.base import DEVICE_MEMORY_CATEGORIES, HOST_MEMORY_CATEGORIES
from neuron_monitor.backends.scenario import (
    APP_CORE_DEVICE_MEMORY,
    DRIVER_HOST_MEMORY_PER_DEVICE,
    DRIVER_MEMORY_PER_CORE,
    ERROR_COUNTERS,
    Scenario,
    default_scenario,
    load_scenario,
    parse_scenario,
)
from neuron_monitor.backends.simulation import LATENCY_WINDOW, Simulation
from neuron_monitor.catalogue import INSTANCE_TYPES, instance_type
from tests.test_scenario import DEFAULT_FILE


def state(sim: Simulation) -> tuple[Any, ...]:
    return (
        [(c.busy_us, c.flops, tuple(c.status.values()), tuple(c.device_memory.values()), c.host_memory)
         for c in sim.core_states()],
        [(tuple(d.ecc.values()), tuple(d.host_memory.values())) for d in sim.device_states()],
        [(a.pid, a.cpu_user_s, a.cpu_system_s, a.executions, a.latency_seq, tuple(a.latency_total),
          tuple(a.latency_device)) for a in sim.applications()],
    )


def simulate(name: str, t: float, data: dict[str, Any] | None = None, seed: int = 1) -> Simulation:
    scenario = parse_scenario(data) if data is not None else Scenario()
    sim = Simulation(instance_type(name), scenario, seed=seed, start=100.0)
    sim.advance_to(100.0 + t)
    return sim


def check_consistency(sim: Simulation) -> None:
    """Every cross-check between the simulation's numbers."""
    elapsed_us = sim.elapsed_s * 1e6
    lnc = sim.lnc
    apps = sim.applications()
    owner: dict[int, int] = {}
    for app in sim.apps:
        # executions the application ran are exactly the status increments on its cores
        firsts = [sim.core_states()[lc * lnc] for lc in app.cores]
        if all(other.index == app.index or not set(other.cores) & set(app.cores) for other in sim.apps):
            assert app.executions == sum(c.executions for c in firsts)
        assert all(d <= t for d, t in zip(app.latency_device, app.latency_total, strict=True))
        assert len(app.latency_total) == len(app.latency_device) <= LATENCY_WINDOW
        assert app.latency_seq >= len(app.latency_total)
        assert app.cpu_user_s >= 0 and app.cpu_system_s >= 0
    for app in apps:
        for lc in app.cores:
            for p in sim.physical_cores_of(lc):
                assert p not in owner, "a core used by two running applications"
                owner[p] = app.index
    # only the first physical core of a logical core counts outcomes
    for core in sim.core_states():
        if core.core % lnc:
            assert core.executions == 0
        assert 0 <= core.busy_us <= elapsed_us  # utilization within [0, 100 %]
        assert core.flops % 2 == 0  # 2 x MACs
    # memory: the driver's plus what the running applications have loaded
    by_core = {c.core: dict.fromkeys(DEVICE_MEMORY_CATEGORIES, 0) for c in sim.core_states()}
    host_by_core = dict.fromkeys(by_core, 0)
    by_device = {d.device: dict.fromkeys(HOST_MEMORY_CATEGORIES, 0) for d in sim.device_states()}
    for device in by_device.values():
        device.update(DRIVER_HOST_MEMORY_PER_DEVICE)
    for core in by_core.values():
        core["driver_memory"] = DRIVER_MEMORY_PER_CORE
    for app in apps:
        models = sim.models_of(app)
        for model in models:
            assert [sg.core for sg in model.subgraphs] == list(app.cores)
            for sg in model.subgraphs:
                physical = sim.physical_cores_of(sg.core)
                assert sg.device == physical[0] // sim.arch.physical_cores_per_device
                for name, value in sg.device_memory.items():
                    for p in physical:
                        by_core[p][name] += value / lnc
                for name, value in sg.host.items():
                    by_device[sg.device][name] += value
                    for p in physical:
                        host_by_core[p] += value / lnc
        for lc in app.cores:
            for name, value in APP_CORE_DEVICE_MEMORY.items():
                for p in sim.physical_cores_of(lc):
                    by_core[p][name] += value / lnc
        host = app.host_memory()
        assert host == {name: sum(sg.host[name] for m in models for sg in m.subgraphs) for name in host}
    for core in sim.core_states():
        assert core.device_memory == pytest.approx(by_core[core.core], abs=lnc)
        assert core.host_memory == pytest.approx(host_by_core[core.core], abs=lnc)
    for device in sim.device_states():
        assert device.host_memory == by_device[device.device]


# --- determinism ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["trn2.48xlarge", "inf1.6xlarge"])
def test_same_seed_same_state_whatever_the_query_pattern(name: str) -> None:
    one = simulate(name, 30.0)
    other = Simulation(instance_type(name), Scenario(), seed=1, start=100.0)
    for t in (100.0, 100.05, 101.0, 101.01, 107.3, 107.3, 50.0, 129.99, 130.0):
        other.advance_to(t)
        other.models_of(other.apps[0])  # reading changes nothing
    assert state(one) == state(other)
    assert one.now == other.now == 130.0
    assert state(simulate(name, 30.0, seed=2)) != state(one)


def test_the_default_file_and_default_scenario_run_identically() -> None:
    instance = instance_type("trn1.32xlarge")
    from_file = Simulation(instance, load_scenario(DEFAULT_FILE), seed=4, start=0.0)
    built_in = Simulation(instance, default_scenario(instance), seed=4, start=0.0)
    from_file.advance_to(20.0)
    built_in.advance_to(20.0)
    assert state(from_file) == state(built_in)


# --- consistency ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(INSTANCE_TYPES))
def test_every_instance_type_is_busy_and_consistent(name: str) -> None:
    sim = simulate(name, 20.0)
    instance = instance_type(name)
    assert len(sim.core_states()) == instance.device_count * instance.architecture.physical_cores_per_device
    assert len(sim.applications()) == instance.device_count
    for core in sim.core_states():
        utilization = core.busy_us / (sim.elapsed_s * 1e6)
        assert 0.3 < utilization < 0.9, (core.core, utilization)
        assert core.flops > 0 and core.model_load_count == (3 if core.core % sim.lnc == 0 else 0)
    assert all(app.executions > 0 and app.latency_seq > 0 for app in sim.applications())
    check_consistency(sim)


def test_trn2_physical_cores_of_a_logical_core_differ_slightly() -> None:
    sim = simulate("trn2.48xlarge", 20.0)
    for lc in range(64):
        first, second = (sim.core_states()[p] for p in sim.physical_cores_of(lc))
        assert 0.9 < second.busy_us / first.busy_us < 1.0
        assert first.flops == second.flops
        assert first.device_memory["model_code"] - second.device_memory["model_code"] in (0, 1)


def test_every_counter_moves_within_minutes_by_default() -> None:
    sim = simulate("trn2.48xlarge", 300.0)
    totals = {name: sum(c.status[name] for c in sim.core_states()) for name in ERROR_COUNTERS}
    assert all(totals.values()), [n for n, v in totals.items() if not v]
    ecc = {name: sum(d.ecc[name] for d in sim.device_states()) for name in sim.device_states()[0].ecc}
    assert all(ecc.values()), ecc
    check_consistency(sim)


def test_counters_only_grow() -> None:
    sim = Simulation(instance_type("inf2.xlarge"), Scenario(), seed=9, start=0.0)
    previous = state(sim)
    for t in range(1, 30, 3):
        sim.advance_to(float(t))
        now = state(sim)
        for before, after in zip(previous[0], now[0], strict=True):
            assert after[0] >= before[0] and after[1] >= before[1]
            assert all(a >= b for a, b in zip(after[2], before[2], strict=True))
        previous = now


def test_error_rates_are_followed() -> None:
    sim = simulate("inf2.xlarge", 10.0, {"faults": {"error_rates": {"hw_error": 0.5},
                                                    "ecc_per_hour": {"mem_ecc_uncorrected": 36000}}})
    hw = sum(c.status["hw_error"] for c in sim.core_states())
    ok = sum(c.status["success"] for c in sim.core_states())
    assert 0.45 < hw / (hw + ok) < 0.55
    assert 70 < sim.device_states()[0].ecc["mem_ecc_uncorrected"] < 130  # ~100 expected
    check_consistency(sim)


def test_a_vanishingly_small_error_rate_means_no_errors() -> None:
    sim = simulate("inf2.xlarge", 5.0, {"faults": {"error_rates": {"failure": 5e-324}}})
    assert sum(c.status["failure"] for c in sim.core_states()) == 0
    assert sum(c.status["success"] for c in sim.core_states()) > 0


def test_inf1_counts_no_ecc_events() -> None:
    sim = simulate("inf1.xlarge", 10.0, {"faults": {"ecc_per_hour": {"mem_ecc_uncorrected": 36000}}})
    assert sum(sim.device_states()[0].ecc.values()) == 0


def test_an_application_can_override_the_error_rates() -> None:
    sim = simulate("inf2.xlarge", 10.0, {"applications": [
        {"cores": "0", "error_rates": {"oob_error": 1.0}}, {"cores": "1", "error_rates": {}}]})
    first, second = sim.core_states()
    assert first.status["oob_error"] == first.executions > 0 and first.status["success"] == 0
    assert second.status["success"] == second.executions > 0


def test_timeouts_keep_cores_busy_and_failed_queueing_frees_them() -> None:
    app = {"cores": "0", "models": [{"name": "m", "executions_per_second": 20, "latency_ms_median": 10}]}
    plain = simulate("trn1.2xlarge", 20.0, {"applications": [app], "faults": {"error_rates": {}}})
    timeouts = simulate("trn1.2xlarge", 20.0, {"applications": [app], "faults": {
        "error_rates": {"timeout": 0.05}, "timeout_busy_s": 1.0}})
    unqueued = simulate("trn1.2xlarge", 20.0, {"applications": [app], "faults": {
        "error_rates": {"execute_failed_to_queue": 0.5}}})
    busy = [s.core_states()[0].busy_us for s in (plain, timeouts, unqueued)]
    assert busy[1] > 2 * busy[0] and busy[2] < 0.7 * busy[0]
    assert busy[1] <= 20e6  # still at most 100 %
    for sim in (plain, timeouts, unqueued):
        check_consistency(sim)


def test_an_overloaded_core_is_busy_at_most_all_the_time() -> None:
    sim = simulate("inf2.xlarge", 10.0, {"applications": [{"models": [
        {"name": "heavy", "executions_per_second": 100, "latency_ms_median": 50, "device_share": 1}]}]})
    for core in sim.core_states():
        assert 0.99 * 10e6 <= core.busy_us <= 10e6
    check_consistency(sim)


def test_idle_models_are_loaded_but_do_not_run() -> None:
    sim = simulate("inf2.xlarge", 5.0, {"applications": [{"cores": "0", "models": [
        {"name": "idle", "is_running": False}]}]})
    core = sim.core_states()[0]
    assert core.executions == 0 and core.busy_us == 0 and core.device_memory["constants"] > 0
    assert [m.is_running for m in sim.models_of(sim.applications()[0])] == [False]
    check_consistency(sim)


# --- applications coming and going -------------------------------------------------------------


def test_applications_start_and_stop() -> None:
    data = {"applications": [
        {"tag": "early", "cores": "0", "stop_s": 2.0},
        {"tag": "late", "cores": "0", "start_s": 3.0},
        {"cores": "1"}]}
    sim = Simulation(instance_type("trn1.2xlarge"), parse_scenario(data), seed=1, start=0.0)

    def tags(t: float) -> list[str]:
        sim.advance_to(t)
        check_consistency(sim)
        return [a.effective_tag for a in sim.applications()]

    assert tags(1.0) == ["early", "10014"]  # no tag: the pid is the tag
    core0 = sim.core_states()[0]
    early = sim.applications()[0]
    assert core0.executions > 0 and core0.model_load_count == 3  # trn1's default models
    assert tags(2.5) == ["10014"]
    # the stopped application's memory is freed; its counters stay (they are cumulative)
    idle = {**dict.fromkeys(DEVICE_MEMORY_CATEGORIES, 0), "driver_memory": DRIVER_MEMORY_PER_CORE}
    assert core0.device_memory == idle
    ran_early = early.executions
    assert core0.host_memory == 0 and core0.executions == ran_early
    busy_when_idle = core0.busy_us
    sim.advance_to(2.9)
    assert core0.busy_us - busy_when_idle < 50_000  # only queued work drains
    assert tags(3.5) == ["late", "10014"]
    assert core0.model_load_count == 6 and core0.device_memory["constants"] > 0
    late = sim.applications()[0]
    assert late.executions == core0.executions - ran_early


def test_the_pid_can_be_set_and_an_untagged_application_follows_it() -> None:
    sim = simulate("inf2.xlarge", 1.0, {"applications": [{"cores": "0"}, {"tag": "named", "cores": "1"}]})
    untagged, named = sim.applications()
    assert (untagged.pid, untagged.effective_tag) == (10_000, "10000")
    untagged.pid = 4242
    named.pid = 4343
    assert (untagged.effective_tag, named.effective_tag) == ("4242", "named")


# --- a property over random scenarios -----------------------------------------------------------

_MODEL = st.fixed_dictionaries({
    "name": st.sampled_from(["a", "b", "c"]),
    "executions_per_second": st.floats(min_value=0, max_value=400),
    "latency_ms_median": st.floats(min_value=0.1, max_value=200),
    "latency_sigma": st.floats(min_value=0, max_value=1.5),
    "device_share": st.floats(min_value=0.05, max_value=1),
    "is_running": st.booleans(),
    "device_memory": st.fixed_dictionaries({"constants": st.integers(min_value=0, max_value=200 * 1024**2),
                                            "tensors": st.integers(min_value=0, max_value=100 * 1024**2)}),
})
_APP = st.fixed_dictionaries(
    {"cores": st.integers(min_value=1, max_value=2), "models": st.lists(_MODEL, min_size=1, max_size=3)},
    optional={"start_s": st.floats(min_value=0, max_value=3), "tag": st.text(min_size=1, max_size=5)},
)


@settings(max_examples=25, deadline=None)
@given(
    instance=st.sampled_from(["inf1.6xlarge", "inf2.24xlarge", "trn2.48xlarge"]),
    apps=st.lists(_APP, min_size=1, max_size=4),
    rates=st.dictionaries(st.sampled_from(ERROR_COUNTERS), st.floats(min_value=0, max_value=0.2), max_size=4),
    seed=st.integers(min_value=0, max_value=2**32),
    t=st.floats(min_value=0, max_value=6),
)
def test_random_scenarios_stay_consistent(instance: str, apps: list[dict[str, Any]], rates: dict[str, float],
                                          seed: int, t: float) -> None:
    data = {"applications": apps, "faults": {"error_rates": rates, "timeout_busy_s": 0.3}}
    sim = simulate(instance, t, data, seed=seed)
    check_consistency(sim)
    again = Simulation(instance_type(instance), parse_scenario(data), seed=seed, start=100.0)
    again.advance_to(100.0 + t / 2)
    again.advance_to(100.0 + t)
    assert state(again) == state(sim)
