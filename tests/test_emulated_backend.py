"""The emulated backend: the DeviceBackend protocol over the simulation, and the emulated
EC2 identity."""

from __future__ import annotations

import itertools
import re

import pytest

from neuron_monitor.backends.base import DeviceBackend, Need
from neuron_monitor.backends.emulated import EmulatedBackend, emulated_identity
from neuron_monitor.backends.scenario import ScenarioError, parse_scenario
from neuron_monitor.catalogue import INSTANCE_TYPES, instance_type

ALL = frozenset(Need)


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.mark.parametrize("name", list(INSTANCE_TYPES))
def test_every_instance_type_emulates(name: str) -> None:
    backend = EmulatedBackend(name, seed=1, clock=Clock(500.0))
    assert isinstance(backend, DeviceBackend) and backend.name == "emulated"
    hw = backend.hardware()
    inst = instance_type(name)
    arch = inst.architecture
    assert (hw.device_type, hw.device_count, hw.device_memory_size, hw.physical_cores_per_device, hw.instance_type) \
        == (arch.neuron_device_type, inst.device_count, arch.device_memory_size, arch.physical_cores_per_device, name)
    assert hw.device_indices == tuple(range(inst.device_count)) and hw.error == ""
    if arch.family == "trn2":
        assert (hw.core_version, hw.logical_core_config, hw.logical_cores_per_device) == ("v3d", 2, 4)
    else:
        assert (hw.core_version, hw.logical_core_config) == (arch.neuroncore_version, None)
    snap = backend.snapshot(ALL, 505.0)
    assert snap.taken_at == 505.0 and snap.hardware == hw and not snap.errors
    assert snap.cores is not None
    assert sorted(snap.cores) == list(range(inst.device_count * hw.physical_cores_per_device))
    assert snap.devices is not None and [d.device for d in snap.devices] == list(range(inst.device_count))
    assert snap.applications is not None and len(snap.applications) == inst.device_count
    for app in snap.applications:
        devices = {hw.device_of_logical(c) for c in app.cores}
        assert len(devices) == 1 and len(app.cores) == hw.logical_cores_per_device
        assert app.models and app.latency is not None and app.latency.end_seq > 0
        assert app.cpu_user_s is not None and app.cpu_user_s > 0 and app.host_memory
        for model in app.models:
            assert [sg.core for sg in model.subgraphs] == list(app.cores)
            assert {sg.device for sg in model.subgraphs} == devices
    busy = [c.busy_us for c in snap.cores.values()]
    assert all(0 < b <= 5e6 for b in busy)
    backend.close()


@pytest.mark.parametrize("size", range(len(Need) + 1))
def test_snapshot_fills_only_what_is_asked(size: int) -> None:
    for needs in map(frozenset, itertools.combinations(Need, size)):
        backend = EmulatedBackend("inf2.xlarge", clock=Clock(0.0))
        snap = backend.snapshot(needs, 3.0)
        assert (snap.cores is not None) == bool(needs & {Need.CORES, Need.CORE_MEMORY})
        assert (snap.devices is not None) == (Need.DEVICES in needs)
        assert (snap.applications is not None) == (Need.APPLICATIONS in needs)
        if snap.cores is not None:
            assert bool(snap.cores[0].device_memory) == (Need.CORE_MEMORY in needs)
        for app in snap.applications or ():
            assert (app.cpu_user_s is not None) == (Need.APP_CPU in needs)
            assert (app.host_memory is not None) == (app.models is not None) == (Need.APP_MEMORY in needs)
            assert (app.latency is not None) == (Need.APP_LATENCY in needs)


def test_readings_agree_with_each_other() -> None:
    backend = EmulatedBackend("trn2.48xlarge", seed=3, clock=Clock(0.0))
    snap = backend.snapshot(ALL, 10.0)
    assert snap.cores is not None and snap.devices is not None and snap.applications is not None
    hw = snap.hardware
    for app in snap.applications:
        physical = [p for lc in app.cores for p in hw.physical_cores_of(lc)]
        # the subgraphs' device memory is on the application's physical cores
        for category in ("constants", "model_code", "tensors"):
            loaded = sum(sg.device_memory[category] for m in app.models or () for sg in m.subgraphs)
            assert sum(snap.cores[p].device_memory[category] for p in physical) == loaded
        host = app.host_memory or {}
        # (per-core host memory is the simulation's own bookkeeping: no reading carries it)
        assert sum(backend.simulation.cores[p].host_memory for p in physical) == sum(host.values())
        device = snap.devices[hw.device_of_logical(app.cores[0])]
        assert all(device.host_memory[name] == value for name, value in host.items())
        assert app.latency is not None
        total, dev = app.latency.since(0)
        assert total and all(d <= t for d, t in zip(dev, total, strict=True))


def test_the_simulation_starts_at_the_clock_and_never_goes_back() -> None:
    scenario = parse_scenario({"applications": [{"tag": "late", "cores": "0", "start_s": 5.0}]})
    backend = EmulatedBackend("trn1.2xlarge", scenario=scenario, clock=Clock(1000.0))
    assert backend.snapshot(ALL, 1004.0).applications == []
    snap = backend.snapshot(ALL, 1006.0)
    assert snap.applications is not None and [a.tag for a in snap.applications] == ["late"]
    before = backend.snapshot(frozenset({Need.CORES}), 1006.0).cores
    assert before is not None
    again = backend.snapshot(frozenset({Need.CORES}), 900.0).cores  # an earlier time: nothing moves
    assert again == before


def test_latency_window_hands_each_consumer_the_new_samples() -> None:
    backend = EmulatedBackend("inf1.xlarge", clock=Clock(0.0))
    first = backend.snapshot(ALL, 1.0).applications
    assert first is not None and first[0].latency is not None
    seen = first[0].latency.end_seq
    later = backend.snapshot(ALL, 2.0).applications
    assert later is not None and later[0].latency is not None
    fresh, _ = later[0].latency.since(seen)
    assert 0 < len(fresh) == later[0].latency.end_seq - seen


def test_a_scenario_that_does_not_fit_is_an_error() -> None:
    with pytest.raises(ScenarioError, match=r"applications\[0\].cores: core 9 does not exist on inf2.xlarge"):
        EmulatedBackend("inf2.xlarge", scenario=parse_scenario({"applications": [{"cores": "9"}]}))
    with pytest.raises(KeyError, match="unknown instance type"):
        EmulatedBackend("p5.48xlarge")


@pytest.mark.parametrize("name", list(INSTANCE_TYPES))
def test_identity_is_plausible_and_deterministic(name: str) -> None:
    info = emulated_identity(name, 1)
    assert info == emulated_identity(name, 1) and info != emulated_identity(name, 2)
    assert info.instance_type == name and info.error == ""
    assert re.fullmatch(r"i-0[0-9a-f]{16}", info.instance_id)
    assert re.fullmatch(r"ami-0[0-9a-f]{16}", info.ami_id)
    assert re.fullmatch(r"subnet-0[0-9a-f]{17}", info.subnet_id)
    assert info.instance_region == ("us-east-2" if name.startswith("trn2") else "us-west-2")
    assert re.fullmatch(re.escape(info.instance_region) + "[a-d]", info.instance_availability_zone)
    prefix = {"us-east-2": "use2", "us-west-2": "usw2"}[info.instance_region]
    assert re.fullmatch(prefix + r"-az[1-4]", info.instance_availability_zone_id)
    assert name.replace(".", "-") in info.instance_name
