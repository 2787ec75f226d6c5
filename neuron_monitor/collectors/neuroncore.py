"""`neuroncore_counters`: utilization and flops of the cores each application uses."""

from __future__ import annotations

from collections.abc import Sequence

from neuron_monitor.backends.base import AppReading, HardwareReading, Need, Snapshot
from neuron_monitor.collectors.base import RuntimeCollector, missing_part
from neuron_monitor.collectors.core_deltas import CoreDelta, CoreDeltaTracker
from neuron_monitor.report import MetricGroup, NeuronCoreCounters, NeuronCoreUsage, V3dCore


def utilization_percent(busy_us: int, period: float) -> float:
    if period <= 0:
        return 0.0
    return round(min(100.0, max(0.0, busy_us / (period * 1e6) * 100.0)), 2)


class NeuronCoreCountersCollector(RuntimeCollector):
    group = "neuroncore_counters"
    needs = frozenset({Need.APPLICATIONS, Need.CORES})

    def __init__(self) -> None:
        self._tracker = CoreDeltaTracker(with_status=False)

    def collect(
        self, snapshot: Snapshot, apps: Sequence[AppReading], period: float
    ) -> dict[int, MetricGroup]:
        if snapshot.cores is None:
            error = missing_part(snapshot, Need.CORES, "core counters")
            return {app.pid: NeuronCoreCounters(period=period, error=error) for app in apps}
        deltas = self._tracker.advance(snapshot.cores)
        hw = snapshot.hardware
        return {app.pid: self._for_app(app, deltas, hw, period) for app in apps}

    @staticmethod
    def _for_app(
        app: AppReading, deltas: dict[int, CoreDelta], hw: HardwareReading, period: float
    ) -> NeuronCoreCounters:
        in_use: dict[str, NeuronCoreUsage] = {}
        errors: list[str] = []
        for logical in app.cores:
            physical = hw.physical_cores_of(logical)
            parts = [deltas.get(p) for p in physical]
            present = [d for d in parts if d is not None]
            errors.extend(d.error for d in present if d.error)
            if not present:
                errors.append(f"neuroncore {logical}: no counters")
                continue
            utils = [utilization_percent(d.busy_us, period) for d in present]
            flops = sum(d.flops for d in present)
            usage = NeuronCoreUsage(
                neuroncore_utilization=round(sum(utils) / len(utils), 2),
                flops=int(flops / period) if period > 0 else 0,
            )
            if hw.logical_core_config:
                usage.v3d = {
                    f"nc_v3.{p}": V3dCore(neuroncore_utilization=u)
                    for p, u in zip(physical, utils, strict=False)
                }
            in_use[str(logical)] = usage
        return NeuronCoreCounters(period=period, neuroncores_in_use=in_use, error="; ".join(errors))
