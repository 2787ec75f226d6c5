"""A small hand-driven backend for collector and scheduler tests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from neuron_monitor.backends.base import (
    AppReading,
    CoreReading,
    DeviceReading,
    HardwareReading,
    Need,
    Snapshot,
)

TRN1_LIKE = HardwareReading(
    device_type="trainium", core_version="v2", device_count=2, device_memory_size=32 * 1024**3,
    physical_cores_per_device=2, logical_core_config=None, instance_type="trn1.2xlarge", device_indices=(0, 1),
)
TRN2_LIKE = HardwareReading(
    device_type="trainium2", core_version="v3d", device_count=1, device_memory_size=96 * 1024**3,
    physical_cores_per_device=8, logical_core_config=2, instance_type="trn2.48xlarge", device_indices=(0,),
)


def core(index: int, device: int = 0, busy_us: int = 0, flops: int = 0,
         status: Mapping[str, int] | None = None, memory: Mapping[str, int] | None = None,
         error: str = "") -> CoreReading:
    return CoreReading(core=index, device=device, busy_us=busy_us, flops=flops, status=dict(status or {}),
                       device_memory=dict(memory or {}), error=error)


@dataclass
class FakeBackend:
    """Returns whatever the test put in it; records what was asked."""

    hw: HardwareReading = TRN1_LIKE
    cores: dict[int, CoreReading] = field(default_factory=dict)
    devices: list[DeviceReading] = field(default_factory=list)
    apps: list[AppReading] = field(default_factory=list)
    errors: dict[Need, str] = field(default_factory=dict)
    asked: list[frozenset[Need]] = field(default_factory=list)
    name: str = "fake"
    closed: bool = False
    on_snapshot: object = None  # optional callable(now) run before answering

    def hardware(self) -> HardwareReading:
        return self.hw

    def snapshot(self, needs: frozenset[Need], now: float) -> Snapshot:
        self.asked.append(needs)
        if callable(self.on_snapshot):
            self.on_snapshot(now)
        wants_cores = Need.CORES in needs or Need.CORE_MEMORY in needs
        return Snapshot(
            taken_at=now,
            hardware=self.hw,
            cores=dict(self.cores) if wants_cores and Need.CORES not in self.errors else None,
            devices=list(self.devices) if Need.DEVICES in needs and Need.DEVICES not in self.errors else None,
            applications=list(self.apps) if Need.APPLICATIONS in needs else None,
            errors=dict(self.errors),
        )

    def close(self) -> None:
        self.closed = True

    def bump_core(self, index: int, busy_us: int = 0, flops: int = 0, **status: int) -> None:
        old = self.cores[index]
        merged = dict(old.status)
        for name, inc in status.items():
            merged[name] = merged.get(name, 0) + inc
        self.cores[index] = replace(old, busy_us=old.busy_us + busy_us, flops=old.flops + flops, status=merged)
