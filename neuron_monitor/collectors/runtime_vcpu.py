"""`neuron_runtime_vcpu_usage`: CPU use of each application over the period.

Percent of one vCPU (as `top` shows it), so a process using four cores fully shows 400.
"""

from __future__ import annotations

from collections.abc import Sequence

from neuron_monitor.backends.base import AppReading, Need, Snapshot
from neuron_monitor.collectors.base import RuntimeCollector
from neuron_monitor.report import MetricGroup, RuntimeVcpuUsage, VcpuUserSystem


class RuntimeVcpuCollector(RuntimeCollector):
    group = "neuron_runtime_vcpu_usage"
    needs = frozenset({Need.APPLICATIONS, Need.APP_CPU})

    def __init__(self) -> None:
        self._previous: dict[int, tuple[float, float]] = {}

    def collect(
        self, snapshot: Snapshot, apps: Sequence[AppReading], period: float
    ) -> dict[int, MetricGroup]:
        out: dict[int, MetricGroup] = {}
        for app in apps:
            if app.cpu_user_s is None or app.cpu_system_s is None:
                out[app.pid] = RuntimeVcpuUsage(period=period, error=app.error or "CPU times unavailable")
                continue
            current = (app.cpu_user_s, app.cpu_system_s)
            prev = self._previous.get(app.pid, current)
            self._previous[app.pid] = current
            user = max(0.0, current[0] - prev[0])
            system = max(0.0, current[1] - prev[1])
            scale = 100.0 / period if period > 0 else 0.0
            out[app.pid] = RuntimeVcpuUsage(
                period=period,
                vcpu_usage=VcpuUserSystem(user=round(user * scale, 2), system=round(system * scale, 2)),
            )
        live = {app.pid for app in apps}
        for gone in set(self._previous) - live:
            del self._previous[gone]
        return out
