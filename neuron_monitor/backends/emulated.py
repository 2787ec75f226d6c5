"""The emulated backend: the simulation answered in the backend protocol's terms."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from neuron_monitor.backends.base import (
    AppReading,
    CoreReading,
    DeviceReading,
    HardwareReading,
    Need,
    Snapshot,
)
from neuron_monitor.backends.scenario import Scenario
from neuron_monitor.backends.simulation import AppState, Simulation
from neuron_monitor.catalogue import InstanceType, instance_type
from neuron_monitor.report import InstanceInfo

# Regions where each family is offered (a plausible pick for the emulated identity).
_REGIONS = {"inf1": "us-east-1", "inf2": "us-east-2", "trn1": "us-west-2", "trn2": "us-east-2"}


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
    region = _REGIONS[instance.family]
    zone_letter = "abc"[int(digest[0], 16) % 3]
    zone_number = 1 + int(digest[1], 16) % 3
    short = "".join(part[0] for part in region.split("-")[:2]) + region.split("-")[2]  # us-east-2 -> ue2
    return InstanceInfo(
        instance_name=f"emulated-{instance.name.replace('.', '-')}",
        instance_id=f"i-0{digest[2:18]}",
        instance_type=instance.name,
        instance_availability_zone=f"{region}{zone_letter}",
        instance_availability_zone_id=f"{short}-az{zone_number}",
        instance_region=region,
        ami_id=f"ami-0{digest[18:34]}",
        subnet_id=f"subnet-0{digest[34:51]}",
    )


class EmulatedBackend:
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
        return self._hardware

    def snapshot(self, needs: frozenset[Need], now: float) -> Snapshot:
        sim = self.simulation
        sim.advance_to(now)
        cores = None
        if Need.CORES in needs or Need.CORE_MEMORY in needs:
            cores = {
                c.core: CoreReading(core=c.core, device=c.device, busy_us=c.busy_us, flops=c.flops,
                                    status=dict(c.status), device_memory=dict(c.device_memory),
                                    host_memory=c.host_memory)
                for c in sim.cores
            }
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
                    host_memory=dict(d.host_memory),
                )
                for d in sim.devices
            ]
        apps = None
        if Need.APPLICATIONS in needs:
            apps = [self._app(app, needs) for app in sim.active_apps()]
        return Snapshot(taken_at=now, hardware=self._hardware, cores=cores, devices=devices, applications=apps)

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
