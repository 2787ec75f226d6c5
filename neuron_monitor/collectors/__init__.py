"""One collector per metric group, and the table that maps a group name to it."""

from __future__ import annotations

from collections.abc import Callable

from neuron_monitor.collectors.base import RuntimeCollector, SystemCollector
from neuron_monitor.collectors.execution import ExecutionStatsCollector
from neuron_monitor.collectors.host import MemoryInfoCollector, VcpuUsageCollector
from neuron_monitor.collectors.hw_counters import HwCountersCollector
from neuron_monitor.collectors.memory import MemoryUsedCollector
from neuron_monitor.collectors.neuroncore import NeuronCoreCountersCollector
from neuron_monitor.collectors.runtime_vcpu import RuntimeVcpuCollector

RUNTIME_COLLECTORS: dict[str, Callable[[], RuntimeCollector]] = {
    "neuroncore_counters": NeuronCoreCountersCollector,
    "execution_stats": ExecutionStatsCollector,
    "memory_used": MemoryUsedCollector,
    "neuron_runtime_vcpu_usage": RuntimeVcpuCollector,
}
SYSTEM_COLLECTORS: dict[str, Callable[[], SystemCollector]] = {
    "neuron_hw_counters": HwCountersCollector,
    "vcpu_usage": VcpuUsageCollector,
    "memory_info": MemoryInfoCollector,
}

__all__ = ["RUNTIME_COLLECTORS", "SYSTEM_COLLECTORS", "RuntimeCollector", "SystemCollector"]
