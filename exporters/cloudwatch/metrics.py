"""Report -> CloudWatch data points.

Every dimension combination is a billed custom metric, so the per-instance aggregates
(dimensions InstanceId, InstanceType) are always sent and finer views are opt-in:
per application (RuntimeTag), per NeuronCore (NeuronCore, NeuronDevice) and per device
(NeuronDevice).  The table in the README lists every metric; `METRICS` below is that table.

Counts (executions, errors, ECC events) are sent once per new collection, like the
Prometheus counters: a report that repeats a group until it runs again is not re-counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from exporters.freshness import FreshnessTracker
from neuron_monitor.report import ERROR_TYPES, EXECUTION_STATUSES, Report, RuntimeEntry

Dimensions = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Datum:
    name: str
    dimensions: Dimensions
    value: float
    unit: str
    timestamp: float  # epoch seconds


@dataclass(frozen=True, slots=True)
class Options:
    per_application: bool = False
    per_core: bool = False
    per_device: bool = False


# name -> (unit, extra dimensions beyond the instance's, description, opt-in)
METRICS: dict[str, tuple[str, str, str, str]] = {
    "NeuronCoreUtilization": ("Percent", "", "mean utilization of the NeuronCores in use", ""),
    "NeuronCoresInUse": ("Count", "", "NeuronCores used by applications", ""),
    "FlopsPerSecond": ("Count/Second", "", "floating-point operations per second, all cores", ""),
    "ExecutionsPerSecond": ("Count/Second", "", "completed executions per second", ""),
    "Executions": ("Count", "Status", "executions in the period, by outcome", ""),
    "ExecutionErrors": ("Count", "ErrorType", "execution errors in the period, by type", ""),
    "ExecutionLatency": ("Seconds", "Percentile (p50, p99)", "worst application's latency percentile", ""),
    "DeviceExecutionLatency": ("Seconds", "Percentile (p50, p99)", "worst application's on-device latency", ""),
    "DeviceMemoryUsed": ("Bytes", "", "device memory used by applications", ""),
    "RuntimeHostMemoryUsed": ("Bytes", "", "host memory used by the Neuron runtimes", ""),
    "EccEvents": ("Count", "EventType", "ECC events in the period", ""),
    "HostCpuUtilization": ("Percent", "", "host CPU busy (100 - idle)", ""),
    "HostMemoryUsed": ("Bytes", "", "host memory in use", ""),
    "HostMemoryUtilization": ("Percent", "", "host memory in use / total", ""),
    "RuntimeCpuUtilization": ("Percent", "RuntimeTag", "application CPU, percent of one vCPU", "per application"),
    "NeuronCoreUtilizationPerCore": ("Percent", "NeuronCore, NeuronDevice", "utilization of each core", "per core"),
    "DeviceEccEvents": ("Count", "NeuronDevice, EventType", "ECC events per device", "per device"),
    "DeviceMemoryUsedPerDevice": ("Bytes", "NeuronDevice", "device memory used on each device", "per device"),
}
LATENCY_POINTS = ("p50", "p99")
ECC_EVENTS = ("mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_corrected", "sram_ecc_uncorrected",
              "mem_ecc_repairable_uncorrected")


@dataclass
class _Out:
    instance: Dimensions
    timestamp: float
    data: list[Datum] = field(default_factory=list)

    def put(self, name: str, value: float, *extra: tuple[str, str], app: Dimensions = ()) -> None:
        unit = METRICS[name][0]
        self.data.append(Datum(name, self.instance + app + extra, float(value), unit, self.timestamp))


class DatumBuilder:
    def __init__(self, options: Options) -> None:
        self.options = options
        self._fresh = FreshnessTracker()

    def build(self, report: Report, timestamp: float) -> list[Datum]:
        info = report.instance_info
        instance: Dimensions = (("InstanceId", info.instance_id or "unknown"),
                                ("InstanceType", info.instance_type or "unknown"))
        out = _Out(instance, timestamp)
        self._runtimes(out, report)
        self._system(out, report)
        return out.data

    def _runtimes(self, out: _Out, report: Report) -> None:
        per_device = report.neuron_hardware_info.neuroncore_per_device_count or 1
        utils: list[float] = []
        flops = 0.0
        device_mem = 0
        host_mem = 0
        status = dict.fromkeys(EXECUTION_STATUSES, 0)
        errors = dict.fromkeys(ERROR_TYPES, 0)
        latency: dict[str, list[float]] = {}
        per_device_mem: dict[int, int] = {}
        counted_any = False
        live: set[tuple[str, int]] = set()
        for entry in report.neuron_runtime_data:
            live.add((entry.neuron_runtime_tag, entry.pid))
            app: Dimensions = (("RuntimeTag", entry.neuron_runtime_tag),)
            groups = entry.report
            nc = groups.neuroncore_counters
            if nc is not None and not nc.error:
                for core, usage in nc.neuroncores_in_use.items():
                    utils.append(usage.neuroncore_utilization)
                    flops += usage.flops
                    if self.options.per_core:
                        out.put("NeuronCoreUtilizationPerCore", usage.neuroncore_utilization,
                                ("NeuronCore", core), ("NeuronDevice", str(int(core) // per_device)))
            mem = groups.memory_used
            if mem is not None and not mem.error:
                used = mem.neuron_runtime_used_bytes
                device_mem += used.neuron_device
                host_mem += used.host
                for core, breakdown in used.usage_breakdown.neuroncore_memory_usage.items():
                    d = int(core) // per_device
                    per_device_mem[d] = per_device_mem.get(d, 0) + breakdown.total()
            vcpu = groups.neuron_runtime_vcpu_usage
            if vcpu is not None and not vcpu.error and self.options.per_application:
                out.put("RuntimeCpuUtilization", vcpu.vcpu_usage.user + vcpu.vcpu_usage.system, app=app)
            counted_any |= self._execution(out, entry, status=status, errors=errors, latency=latency, app=app)
        if utils:
            out.put("NeuronCoreUtilization", sum(utils) / len(utils))
            out.put("FlopsPerSecond", flops)
        out.put("NeuronCoresInUse", len(utils))
        if report.neuron_runtime_data:
            out.put("DeviceMemoryUsed", device_mem)
            out.put("RuntimeHostMemoryUsed", host_mem)
        if self.options.per_device:
            for d, value in sorted(per_device_mem.items()):
                out.put("DeviceMemoryUsedPerDevice", value, ("NeuronDevice", str(d)))
        if counted_any:
            for name, count in status.items():
                out.put("Executions", count, ("Status", name))
            for name, count in errors.items():
                out.put("ExecutionErrors", count, ("ErrorType", name))
        for metric_point, values in latency.items():
            metric, point = metric_point.split("/")
            out.put(metric, max(values), ("Percentile", point))
        self._fresh.forget_except({*live, "hw"})

    def _execution(self, out: _Out, entry: RuntimeEntry, *, status: dict[str, int], errors: dict[str, int],
                   latency: dict[str, list[float]], app: Dimensions) -> bool:
        ex = entry.report.execution_stats
        if ex is None or ex.error:
            return False
        if not self._fresh.is_new((entry.neuron_runtime_tag, entry.pid), ex):
            return False
        summary = ex.execution_summary.model_dump()
        for name in EXECUTION_STATUSES:
            status[name] += summary[name]
        for name, count in ex.error_summary.model_dump().items():
            errors[name] += count
        if ex.period > 0:
            out.put("ExecutionsPerSecond", ex.execution_summary.completed / ex.period, app=app)
        for metric, stats in (("ExecutionLatency", ex.latency_stats.total_latency),
                              ("DeviceExecutionLatency", ex.latency_stats.device_latency)):
            if stats is not None:
                values = stats.model_dump()
                for point in LATENCY_POINTS:
                    latency.setdefault(f"{metric}/{point}", []).append(values[point])
        return True

    def _system(self, out: _Out, report: Report) -> None:
        sysd = report.system_data
        vcpu = sysd.vcpu_usage
        if vcpu is not None and not vcpu.error:
            out.put("HostCpuUtilization", round(100.0 - vcpu.average_usage.idle, 2))
        mem = sysd.memory_info
        if mem is not None and not mem.error and mem.memory_total_bytes:
            out.put("HostMemoryUsed", mem.memory_used_bytes)
            out.put("HostMemoryUtilization", round(mem.memory_used_bytes / mem.memory_total_bytes * 100, 2))
        hw = sysd.neuron_hw_counters
        if hw is not None and not hw.error:
            if not self._fresh.is_new("hw", hw):
                return
            totals = dict.fromkeys(ECC_EVENTS, 0)
            for dev in hw.neuron_devices:
                values = dev.model_dump()
                for event in ECC_EVENTS:
                    totals[event] += values[event]
                    if self.options.per_device:
                        out.put("DeviceEccEvents", values[event], ("NeuronDevice", str(dev.neuron_device_index)),
                                ("EventType", event))
            for event, count in totals.items():
                out.put("EccEvents", count, ("EventType", event))


def metric_table() -> Iterable[tuple[str, str, str, str, str]]:
    for name, (unit, dims, description, opt_in) in METRICS.items():
        yield name, unit, dims, description, opt_in
