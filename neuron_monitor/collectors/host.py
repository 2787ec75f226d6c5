"""System groups read from the host with psutil: `vcpu_usage` and `memory_info`.

These describe the machine the daemon runs on (or the host's /proc when it is mounted and
psutil is pointed at it), whatever the device backend is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psutil

from neuron_monitor.backends.base import Snapshot
from neuron_monitor.collectors.base import SystemCollector
from neuron_monitor.report import CpuTimesPercent, MemoryInfo, MetricGroup, VcpuUsage

_CPU_FIELDS = (
    ("user", "user"),
    ("nice", "nice"),
    ("system", "system"),
    ("idle", "idle"),
    ("io_wait", "iowait"),
    ("irq", "irq"),
    ("soft_irq", "softirq"),
)


def _times_tuple(times: Any) -> tuple[float, ...]:
    return tuple(float(getattr(times, src, 0.0)) for _, src in _CPU_FIELDS)


def _percent(prev: tuple[float, ...], cur: tuple[float, ...]) -> CpuTimesPercent:
    # Steal/guest time is not in the report; it is left out of the denominator too,
    # so the seven fields add up to 100.
    deltas = [max(0.0, c - p) for p, c in zip(prev, cur, strict=True)]
    total = sum(deltas)
    if total <= 0:
        return CpuTimesPercent()
    values = {name: round(d / total * 100.0, 2) for (name, _), d in zip(_CPU_FIELDS, deltas, strict=True)}
    return CpuTimesPercent(**values)


class VcpuUsageCollector(SystemCollector):
    group = "vcpu_usage"

    def __init__(
        self,
        per_cpu: Callable[[], Sequence[Any]] = lambda: psutil.cpu_times(percpu=True),
        ctx_switches: Callable[[], int] = lambda: int(psutil.cpu_stats().ctx_switches),
    ) -> None:
        self._per_cpu = per_cpu
        self._ctx_switches = ctx_switches
        self._prev_cpus: list[tuple[float, ...]] = [_times_tuple(t) for t in per_cpu()]
        self._prev_ctx = ctx_switches()

    def collect(self, snapshot: Snapshot, period: float) -> MetricGroup:
        cpus = [_times_tuple(t) for t in self._per_cpu()]
        ctx = self._ctx_switches()
        prev = self._prev_cpus
        if len(prev) != len(cpus):  # CPU hot-plug: start over from this reading
            prev = cpus
        usage = {str(i): _percent(p, c) for i, (p, c) in enumerate(zip(prev, cpus, strict=True))}
        total_prev = tuple(map(sum, zip(*prev, strict=True))) if prev else ()
        total_cur = tuple(map(sum, zip(*cpus, strict=True))) if cpus else ()
        average = _percent(total_prev, total_cur) if cpus else CpuTimesPercent()
        switches = max(0, ctx - self._prev_ctx)
        self._prev_cpus, self._prev_ctx = cpus, ctx
        return VcpuUsage(
            period=period, average_usage=average, usage_data=usage, context_switch_count=switches
        )


class MemoryInfoCollector(SystemCollector):
    group = "memory_info"

    def collect(self, snapshot: Snapshot, period: float) -> MetricGroup:
        vm = psutil.virtual_memory()
        swap = psutil.swap_memory()
        return MemoryInfo(
            period=period,
            memory_total_bytes=int(vm.total),
            # "used" as the kernel's MemAvailable sees it: what applications cannot get back.
            memory_used_bytes=int(vm.total - vm.available),
            swap_total_bytes=int(swap.total),
            swap_used_bytes=int(swap.used),
        )
