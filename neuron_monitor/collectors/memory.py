"""`memory_used`: host and device memory of each application, with its loaded models.

Device memory is read per core (the driver's `device_mem/<category>` counters) and
attributed to the application using that core; the totals are the sums of the
breakdowns, so `neuron_device == sum(neuroncore_memory_usage)` always holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from neuron_monitor.backends.base import AppReading, ModelReading, Need, Snapshot
from neuron_monitor.collectors.base import RuntimeCollector, missing_part
from neuron_monitor.report import (
    CoreMemoryBreakdown,
    HostMemoryBreakdown,
    LoadedModel,
    MemoryUsed,
    MetricGroup,
    RuntimeUsageBreakdown,
    RuntimeUsedBytes,
    Subgraph,
    SubgraphDeviceBreakdown,
    SubgraphMemory,
    SubgraphUsageBreakdown,
)

_CORE_FIELDS = tuple(CoreMemoryBreakdown.model_fields)
_HOST_FIELDS = tuple(HostMemoryBreakdown.model_fields)
_SUBGRAPH_DEVICE_FIELDS = tuple(SubgraphDeviceBreakdown.model_fields)


def _pick(source: Mapping[str, int], fields: tuple[str, ...]) -> dict[str, int]:
    return {f: int(source.get(f, 0)) for f in fields}


def loaded_model(model: ModelReading) -> LoadedModel:
    subgraphs = {}
    for sg in model.subgraphs:
        host = HostMemoryBreakdown(**_pick(sg.host, _HOST_FIELDS))
        device = SubgraphDeviceBreakdown(**_pick(sg.device_memory, _SUBGRAPH_DEVICE_FIELDS))
        subgraphs[sg.name] = Subgraph(
            memory_used_bytes=SubgraphMemory(
                host=host.total(),
                neuron_device=device.total(),
                usage_breakdown=SubgraphUsageBreakdown(host=host, neuron_device=device),
            ),
            neuroncore_index=sg.core,
            neuron_device_index=sg.device,
        )
    return LoadedModel(
        name=model.name, uuid=model.uuid, model_id=model.model_id, is_running=model.is_running,
        subgraphs=subgraphs,
    )


class MemoryUsedCollector(RuntimeCollector):
    group = "memory_used"
    needs = frozenset({Need.APPLICATIONS, Need.CORE_MEMORY, Need.APP_MEMORY})

    def collect(
        self, snapshot: Snapshot, apps: Sequence[AppReading], period: float
    ) -> dict[int, MetricGroup]:
        if snapshot.cores is None:
            error = missing_part(snapshot, Need.CORE_MEMORY, "core memory counters")
            return {app.pid: MemoryUsed(period=period, error=error) for app in apps}
        return {app.pid: self._for_app(snapshot, app, period) for app in apps}

    @staticmethod
    def _for_app(snapshot: Snapshot, app: AppReading, period: float) -> MemoryUsed:
        assert snapshot.cores is not None  # noqa: S101 - checked by the caller
        errors: list[str] = []
        per_core: dict[str, CoreMemoryBreakdown] = {}
        for logical in app.cores:
            sums = dict.fromkeys(_CORE_FIELDS, 0)
            for p in snapshot.hardware.physical_cores_of(logical):
                core = snapshot.cores.get(p)
                if core is None:
                    errors.append(f"core {p}: no memory counters")
                    continue
                if core.error:
                    errors.append(core.error)
                for f in _CORE_FIELDS:
                    sums[f] += int(core.device_memory.get(f, 0))
            per_core[str(logical)] = CoreMemoryBreakdown(**sums)
        host = HostMemoryBreakdown(**_pick(app.host_memory or {}, _HOST_FIELDS))
        models = [loaded_model(m) for m in app.models] if app.models else []
        return MemoryUsed(
            period=period,
            neuron_runtime_used_bytes=RuntimeUsedBytes(
                host=host.total(),
                neuron_device=sum(b.total() for b in per_core.values()),
                usage_breakdown=RuntimeUsageBreakdown(host=host, neuroncore_memory_usage=per_core),
            ),
            loaded_models=models,
            error="; ".join(dict.fromkeys(errors)),
        )
