"""The report: typed models whose JSON is exactly the original tool's document.

Exporters only ever see these models.  Field names and nesting follow the original
neuron-monitor output; optional metric groups are left out of the JSON when they were
not configured (a `None` group is dropped), while `None` *values* that the format
defines (`latency_stats.total_latency: null`) are kept.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

PERCENTILES: tuple[str, ...] = ("p0", "p1", "p25", "p50", "p75", "p99", "p100")
ERROR_TYPES: tuple[str, ...] = ("generic", "numerical", "transient", "model", "runtime", "hardware")
EXECUTION_STATUSES: tuple[str, ...] = (
    "completed",
    "completed_with_err",
    "completed_with_num_err",
    "timed_out",
    "incorrect_input",
    "failed_to_queue",
)
RUNTIME_GROUPS: tuple[str, ...] = (
    "neuroncore_counters",
    "memory_used",
    "neuron_runtime_vcpu_usage",
    "execution_stats",
)
SYSTEM_GROUPS: tuple[str, ...] = ("neuron_hw_counters", "vcpu_usage", "memory_info")


class _Model(BaseModel):
    # Parsing is lenient about extra keys so that the pipeline front ends accept reports
    # from newer or older versions of the original tool; what we emit is always exact.
    model_config = ConfigDict(extra="ignore", validate_assignment=False)


def _is_none(value: object) -> bool:
    return value is None


def omitted_when_none() -> Any:
    """An optional member left out of the JSON when absent (a group that is not configured)."""
    return Field(default=None, exclude_if=_is_none)


class MetricGroup(_Model):
    """Every metric group carries the measured period and an error string."""

    period: float = 0.0
    error: str = ""
    # Not in the JSON: which collection produced this object (the scheduler numbers them), so
    # exporters can tell a new collection from the same one repeated in the next report.
    # 0 when unknown (a report parsed from JSON).
    _collection: int = PrivateAttr(default=0)

    @property
    def collection(self) -> int:
        return self._collection

    def mark_collection(self, number: int) -> None:
        self._collection = number


# --- runtime groups -----------------------------------------------------------------


class V3dCore(_Model):
    neuroncore_utilization: float = 0.0


class NeuronCoreUsage(_Model):
    neuroncore_utilization: float = 0.0
    flops: int = 0
    v3d: dict[str, V3dCore] | None = omitted_when_none()


class NeuronCoreCounters(MetricGroup):
    neuroncores_in_use: dict[str, NeuronCoreUsage] = Field(default_factory=dict)


class ErrorSummary(_Model):
    generic: int = 0
    numerical: int = 0
    transient: int = 0
    model: int = 0
    runtime: int = 0
    hardware: int = 0


class ExecutionSummary(_Model):
    completed: int = 0
    completed_with_err: int = 0
    completed_with_num_err: int = 0
    timed_out: int = 0
    incorrect_input: int = 0
    failed_to_queue: int = 0


class LatencyPercentiles(_Model):
    p0: float
    p1: float
    p25: float
    p50: float
    p75: float
    p99: float
    p100: float


class LatencyStats(_Model):
    total_latency: LatencyPercentiles | None = None
    device_latency: LatencyPercentiles | None = None


class ExecutionStats(MetricGroup):
    error_summary: ErrorSummary = Field(default_factory=ErrorSummary)
    execution_summary: ExecutionSummary = Field(default_factory=ExecutionSummary)
    latency_stats: LatencyStats = Field(default_factory=LatencyStats)


class HostMemoryBreakdown(_Model):
    application_memory: int = 0
    constants: int = 0
    dma_buffers: int = 0
    tensors: int = 0

    def total(self) -> int:
        return self.application_memory + self.constants + self.dma_buffers + self.tensors


class CoreMemoryBreakdown(_Model):
    constants: int = 0
    model_code: int = 0
    model_shared_scratchpad: int = 0
    runtime_memory: int = 0
    tensors: int = 0

    def total(self) -> int:
        return (
            self.constants
            + self.model_code
            + self.model_shared_scratchpad
            + self.runtime_memory
            + self.tensors
        )


class RuntimeUsageBreakdown(_Model):
    host: HostMemoryBreakdown = Field(default_factory=HostMemoryBreakdown)
    neuroncore_memory_usage: dict[str, CoreMemoryBreakdown] = Field(default_factory=dict)


class RuntimeUsedBytes(_Model):
    host: int = 0
    neuron_device: int = 0
    usage_breakdown: RuntimeUsageBreakdown = Field(default_factory=RuntimeUsageBreakdown)


class SubgraphDeviceBreakdown(_Model):
    constants: int = 0
    model_code: int = 0
    runtime_memory: int = 0
    tensors: int = 0

    def total(self) -> int:
        return self.constants + self.model_code + self.runtime_memory + self.tensors


class SubgraphUsageBreakdown(_Model):
    host: HostMemoryBreakdown = Field(default_factory=HostMemoryBreakdown)
    neuron_device: SubgraphDeviceBreakdown = Field(default_factory=SubgraphDeviceBreakdown)


class SubgraphMemory(_Model):
    host: int = 0
    neuron_device: int = 0
    usage_breakdown: SubgraphUsageBreakdown = Field(default_factory=SubgraphUsageBreakdown)


class Subgraph(_Model):
    memory_used_bytes: SubgraphMemory = Field(default_factory=SubgraphMemory)
    neuroncore_index: int = 0
    neuron_device_index: int = 0


class LoadedModel(_Model):
    name: str
    uuid: str
    model_id: int
    is_running: bool
    subgraphs: dict[str, Subgraph] = Field(default_factory=dict)


class MemoryUsed(MetricGroup):
    neuron_runtime_used_bytes: RuntimeUsedBytes = Field(default_factory=RuntimeUsedBytes)
    loaded_models: list[LoadedModel] = Field(default_factory=list)


class VcpuUserSystem(_Model):
    user: float = 0.0
    system: float = 0.0


class RuntimeVcpuUsage(MetricGroup):
    vcpu_usage: VcpuUserSystem = Field(default_factory=VcpuUserSystem)


class RuntimeGroups(_Model):
    neuroncore_counters: NeuronCoreCounters | None = omitted_when_none()
    execution_stats: ExecutionStats | None = omitted_when_none()
    memory_used: MemoryUsed | None = omitted_when_none()
    neuron_runtime_vcpu_usage: RuntimeVcpuUsage | None = omitted_when_none()


class RuntimeEntry(_Model):
    pid: int
    address: str = ""
    neuron_runtime_tag: str
    error: str = ""
    report: RuntimeGroups = Field(default_factory=RuntimeGroups)


# --- system groups ------------------------------------------------------------------


class DeviceEcc(_Model):
    neuron_device_index: int
    mem_ecc_corrected: int = 0
    mem_ecc_uncorrected: int = 0
    sram_ecc_corrected: int = 0
    sram_ecc_uncorrected: int = 0
    # Our addition (the driver counts it; the original report has no field for it): uncorrected
    # HBM errors that the device repaired by row remapping.
    mem_ecc_repairable_uncorrected: int = 0


class NeuronHwCounters(MetricGroup):
    neuron_devices: list[DeviceEcc] = Field(default_factory=list)


class CpuTimesPercent(_Model):
    user: float = 0.0
    nice: float = 0.0
    system: float = 0.0
    idle: float = 0.0
    io_wait: float = 0.0
    irq: float = 0.0
    soft_irq: float = 0.0


class VcpuUsage(MetricGroup):
    average_usage: CpuTimesPercent = Field(default_factory=CpuTimesPercent)
    usage_data: dict[str, CpuTimesPercent] = Field(default_factory=dict)
    context_switch_count: int = 0


class MemoryInfo(MetricGroup):
    memory_total_bytes: int = 0
    memory_used_bytes: int = 0
    swap_total_bytes: int = 0
    swap_used_bytes: int = 0


class SystemData(_Model):
    neuron_hw_counters: NeuronHwCounters | None = omitted_when_none()
    vcpu_usage: VcpuUsage | None = omitted_when_none()
    memory_info: MemoryInfo | None = omitted_when_none()


# --- always-present objects ---------------------------------------------------------


class InstanceInfo(_Model):
    instance_name: str = ""
    instance_id: str = ""
    instance_type: str = ""
    instance_availability_zone: str = ""
    instance_availability_zone_id: str = ""
    instance_region: str = ""
    ami_id: str = ""
    subnet_id: str = ""
    error: str = ""


class NeuronHardwareInfo(_Model):
    neuron_device_type: str = ""
    neuroncore_version: str = ""
    neuron_device_count: int = 0
    neuron_device_memory_size: int = 0
    neuroncore_per_device_count: int = 0
    logical_neuroncore_config: int | None = omitted_when_none()  # trn2 only; other types omit the field
    error: str = ""


class K8sAttribution(_Model):
    pod_name: str = ""
    namespace: str = ""
    container_name: list[str] = Field(default_factory=list)


class NeuronK8sInfo(MetricGroup):
    neuroncores_k8s_info: dict[str, K8sAttribution] = Field(default_factory=dict)
    neurondevices_k8s_info: dict[str, K8sAttribution] = Field(default_factory=dict)


class Report(_Model):
    neuron_runtime_data: list[RuntimeEntry] = Field(default_factory=list)
    system_data: SystemData = Field(default_factory=SystemData)
    instance_info: InstanceInfo = Field(default_factory=InstanceInfo)
    neuron_hardware_info: NeuronHardwareInfo = Field(default_factory=NeuronHardwareInfo)
    neuron_k8s_info: NeuronK8sInfo | None = omitted_when_none()
    # A report is final once built; its encoding is made once (off the event loop, see
    # Exporter.prepare) and reused by whoever asks again.
    _json_line: bytes | None = PrivateAttr(default=None)

    def to_json_line(self) -> bytes:
        """One complete JSON document on one line, newline-terminated (consumers readline())."""
        if self._json_line is None:
            self._json_line = self.model_dump_json().encode() + b"\n"
        return self._json_line
