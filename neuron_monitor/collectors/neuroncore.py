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
        split = bool(hw.logical_core_config)  # trn2: each logical core also shows its physical ones
        for logical in app.cores:
            physical = hw.physical_cores_of(logical)
            utils: list[float] = []
            names: list[str] = []
            flops = 0
            for p in physical:
                d = deltas.get(p)
                if d is None:
                    continue
                if d.error:
                    errors.append(d.error)
                utils.append(utilization_percent(d.busy_us, period))
                names.append(f"nc_v3.{p}")
                flops += d.flops
            if not utils:
                errors.append(f"neuroncore {logical}: no counters")
                continue
            in_use[str(logical)] = NeuronCoreUsage(
                neuroncore_utilization=round(sum(utils) / len(utils), 2),
                flops=int(flops / period) if period > 0 else 0,
                v3d={n: V3dCore(neuroncore_utilization=u) for n, u in zip(names, utils, strict=True)}
                if split else None,
            )
        return NeuronCoreCounters(period=period, neuroncores_in_use=in_use, error="; ".join(errors))
