"""The emulated backend: the simulation answered in the backend protocol's terms."""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable

from neuron_monitor.backends.base import (
    REPORTED_CORE_MEMORY,
    REPORTED_HOST_MEMORY,
    AppReading,
    CoreReading,
    CounterSet,
    DeviceReading,
    HardwareReading,
    Need,
    Snapshot,
)
from neuron_monitor.backends.scenario import Scenario
from neuron_monitor.backends.simulation import COUNTER_LIMIT, AppState, CoreState, Simulation
from neuron_monitor.catalogue import InstanceType, instance_type
from neuron_monitor.execution_mapping import STATUS_COUNTERS
from neuron_monitor.report import InstanceInfo

# Where each family is offered, with the zones of the emulated identity: (region, region's
# AZ-id prefix, (zone letter, AZ id number) choices).  us-east-2 / us-west-2 offer them all
# but trn2, which is in us-east-2 only.
_PLACEMENT: dict[str, tuple[str, str, tuple[tuple[str, int], ...]]] = {
    "inf1": ("us-west-2", "usw2", (("a", 1), ("b", 2), ("c", 3))),
    "inf2": ("us-west-2", "usw2", (("a", 1), ("b", 2), ("d", 4))),
    "trn1": ("us-west-2", "usw2", (("d", 4),)),
    "trn2": ("us-east-2", "use2", (("b", 2), ("c", 3))),
}


def emulated_hardware(instance: InstanceType) -> HardwareReading:
    arch = instance.architecture
    lnc = arch.default_logical_core_config
    return HardwareReading(
        device_type=arch.neuron_device_type,
        core_version="v3d" if lnc else arch.neuroncore_version,
        device_count=instance.device_count,
        device_memory_size=arch.device_memory_size,
        physical_cores_per_device=arch.physical_cores_per_device,
        logical_core_config=lnc,
        instance_type=instance.name,
        device_indices=tuple(range(instance.device_count)),
    )


def emulated_identity(instance_type_name: str, seed: int = 0) -> InstanceInfo:
    """A deterministic, plausible EC2 identity for an emulated instance."""
    instance = instance_type(instance_type_name)
    digest = hashlib.sha256(f"{instance.name}/{seed}".encode()).hexdigest()
    region, prefix, zones = _PLACEMENT[instance.family]
    letter, number = zones[int(digest[0], 16) % len(zones)]
    return InstanceInfo(
        instance_name=f"emulated-{instance.name.replace('.', '-')}-{seed}",
        instance_id=f"i-0{digest[1:17]}",
        instance_type=instance.name,
        instance_availability_zone=f"{region}{letter}",
        instance_availability_zone_id=f"{prefix}-az{number}",
        instance_region=region,
        ami_id=f"ami-0{digest[17:33]}",
        subnet_id=f"subnet-0{digest[33:50]}",
    )


class EmulatedBackend:
    """The DeviceBackend over an in-process Simulation (started at `clock()`, with fake pids)."""

    name = "emulated"

    def __init__(
        self,
        instance_type_name: str,
        seed: int = 0,
        scenario: Scenario | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.instance = instance_type(instance_type_name)
        self.simulation = Simulation(self.instance, scenario or Scenario(), seed, clock())
        self._hardware = emulated_hardware(self.instance)

    def hardware(self) -> HardwareReading:
        absent = self.simulation.absent_devices
        if not absent:
            return self._hardware
        present = tuple(d for d in self._hardware.device_indices if d not in absent)
        return dataclasses.replace(self._hardware, device_count=len(present), device_indices=present)

    def _core(self, c: CoreState, memory: bool) -> CoreReading:
        garbage = self.simulation.garbage
        if garbage:
            local = c.core % self.simulation.arch.physical_cores_per_device
            for (device, core, file), content in garbage.items():
                if device == c.device and core == local:
                    shown = content.strip()[:24]
                    return CoreReading(c.core, c.device, 0, 0, {}, error=f"neuron{device}/neuron_core{core}/{file}: "
                                       f"not a counter value: {shown!r}")
        # The driver's counters are u64: what a reader sees wraps at 2^64.
        sim = self.simulation
        if sim.counter_offsets:
            busy, flops = sim.seen(c.core, "nc_time_in_use", c.busy_us), sim.seen(c.core, "flop_count", c.flops)
            status = {k: sim.seen(c.core, k, v) for k, v in c.status.items()}
        else:
            busy, flops, status = c.busy_us % COUNTER_LIMIT, c.flops % COUNTER_LIMIT, dict(c.status)
        return CoreReading(core=c.core, device=c.device, busy_us=busy, flops=flops,
                           status=CounterSet(STATUS_COUNTERS, tuple(status[n] for n in STATUS_COUNTERS)),
                           device_memory={k: c.device_memory[k] for k in REPORTED_CORE_MEMORY} if memory else {})

    def snapshot(self, needs: frozenset[Need], now: float) -> Snapshot:
        sim = self.simulation
        sim.advance_to(now)
        absent = sim.absent_devices
        cores = None
        if Need.CORES in needs or Need.CORE_MEMORY in needs:
            memory = Need.CORE_MEMORY in needs
            cores = {c.core: self._core(c, memory) for c in sim.core_states() if c.device not in absent}
        devices = None
        if Need.DEVICES in needs:
            devices = [
                DeviceReading(
                    device=d.device,
                    mem_ecc_corrected=d.ecc["mem_ecc_corrected"],
                    mem_ecc_uncorrected=d.ecc["mem_ecc_uncorrected"],
                    sram_ecc_corrected=d.ecc["sram_ecc_corrected"],
                    sram_ecc_uncorrected=d.ecc["sram_ecc_uncorrected"],
                    mem_ecc_repairable_uncorrected=d.ecc["mem_ecc_repairable_uncorrected"],
                    host_memory={k: d.host_memory[k] for k in REPORTED_HOST_MEMORY},
                )
                for d in sim.device_states() if d.device not in absent
            ]
        apps = None
        if Need.APPLICATIONS in needs:
            apps = [self._app(app, needs) for app in sim.applications()]
        return Snapshot(taken_at=now, hardware=self.hardware(), cores=cores, devices=devices, applications=apps)

    def _app(self, app: AppState, needs: frozenset[Need]) -> AppReading:
        return AppReading(
            pid=app.pid,
            tag=app.effective_tag,
            cores=app.cores,
            cpu_user_s=app.cpu_user_s if Need.APP_CPU in needs else None,
            cpu_system_s=app.cpu_system_s if Need.APP_CPU in needs else None,
            host_memory=app.host_memory() if Need.APP_MEMORY in needs else None,
            models=self.simulation.models_of(app) if Need.APP_MEMORY in needs else None,
            latency=app.latency_window() if Need.APP_LATENCY in needs else None,
        )

    def close(self) -> None:
        """Nothing to release: the simulation lives in memory."""
