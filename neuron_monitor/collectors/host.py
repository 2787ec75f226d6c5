"""System groups read from the host: `vcpu_usage` and `memory_info`.

These describe the machine the daemon runs on, whatever the device backend is.  They read
/proc/stat and /proc/meminfo directly, each once per collection: psutil reads /proc/stat
once for the CPU times and again for the context switches, and /proc/meminfo twice plus
/proc/vmstat for memory and swap (on a 192-vCPU trn2 that is 200 lines parsed twice a
second for nothing).  The numbers are the ones psutil gives.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

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
    if type(times) is tuple:  # ProcStat's readings are in _CPU_FIELDS order already
        return times
    return tuple(float(getattr(times, src, 0.0)) for _, src in _CPU_FIELDS)


class ProcStat:
    """Per-CPU times (seconds, in _CPU_FIELDS order) and the context-switch count, from one
    read of /proc/stat: `ctx_switches()` answers from the latest `per_cpu()` read."""

    def __init__(self, path: str = "/proc/stat") -> None:
        self.path = path
        self._ticks = float(os.sysconf("SC_CLK_TCK"))
        self._ctxt = 0

    def per_cpu(self) -> list[tuple[float, ...]]:
        with open(self.path, "rb") as fh:
            lines = fh.read().splitlines()
        ticks = self._ticks
        cpus = []
        for line in lines:
            if line.startswith(b"cpu"):
                if line[3:4].isdigit():  # "cpuN ...", not the "cpu ..." total
                    # user nice system idle iowait irq softirq [steal guest guest_nice]
                    cpus.append(tuple(int(v) / ticks for v in line.split()[1:8]))
            elif line.startswith(b"ctxt "):
                self._ctxt = int(line[5:])
        return cpus

    def ctx_switches(self) -> int:
        return self._ctxt


def read_meminfo(path: str = "/proc/meminfo") -> dict[str, int]:
    """/proc/meminfo in bytes ("MemTotal:  16384 kB" -> {"MemTotal": 16777216})."""
    out: dict[str, int] = {}
    with open(path, "rb") as fh:
        for line in fh.read().splitlines():
            name, _, rest = line.partition(b":")
            fields = rest.split()
            if fields:
                out[name.decode()] = int(fields[0]) * (1024 if len(fields) > 1 else 1)
    return out


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
        per_cpu: Callable[[], Sequence[Any]] | None = None,
        ctx_switches: Callable[[], int] | None = None,
    ) -> None:
        """By default from /proc/stat; tests inject readings (called per_cpu first, then
        ctx_switches, at each collection)."""
        stat = ProcStat()
        self._per_cpu = per_cpu or stat.per_cpu
        self._ctx_switches = ctx_switches or stat.ctx_switches
        self._prev_cpus: list[tuple[float, ...]] = [_times_tuple(t) for t in self._per_cpu()]
        self._prev_ctx = self._ctx_switches()

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

    def __init__(self, meminfo: Callable[[], dict[str, int]] = read_meminfo) -> None:
        self._meminfo = meminfo

    def collect(self, snapshot: Snapshot, period: float) -> MetricGroup:
        info = self._meminfo()
        total = info["MemTotal"]
        # MemAvailable since Linux 3.14; before it, the usual estimate
        available = info.get("MemAvailable",
                             info.get("MemFree", 0) + info.get("Buffers", 0) + info.get("Cached", 0))
        swap_total = info.get("SwapTotal", 0)
        return MemoryInfo(
            period=period,
            memory_total_bytes=total,
            # "used" as the kernel's MemAvailable sees it: what applications cannot get back.
            memory_used_bytes=max(0, total - available),
            swap_total_bytes=swap_total,
            swap_used_bytes=max(0, swap_total - info.get("SwapFree", swap_total)),
        )
