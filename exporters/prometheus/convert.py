"""Report -> Prometheus metric families, with the original companion exporter's names.

One converter serves both the in-process endpoint and the stdin pipeline, so both give the
same series from the same reports.  Names and label conventions of the original are kept
exactly (see the README table); what it lacked is added under `neuron_`/`neuron_monitor_`
names.

Counters (`*_total`) add each *new* collection's per-period counts.  A report repeats a
group's last result until the group runs again, so a group is counted only when it differs
from the last one counted for that application (its measured `period` alone practically
never repeats).  Counts are kept per runtime tag, so an application restarted under the
same tag continues its counters; series of tags no longer present are removed, and so are
groups whose `error` is set (never served stale).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from exporters.freshness import FreshnessTracker
from exporters.prometheus.families import Family, escape_label, labels
from neuron_monitor.report import (
    ERROR_TYPES,
    EXECUTION_STATUSES,
    PERCENTILES,
    RUNTIME_GROUPS,
    SYSTEM_GROUPS,
    CoreMemoryBreakdown,
    ExecutionStats,
    MetricGroup,
    Report,
    RuntimeEntry,
)

INSTANCE_LABELS = ("instance_name", "instance_id", "instance_type", "availability_zone", "region", "subnet_id")
CORE_MEMORY_KINDS = tuple(CoreMemoryBreakdown.model_fields)
ECC_EVENTS = ("mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_corrected", "sram_ecc_uncorrected")


@dataclass(slots=True)
class _Families:
    """Every family, in exposition order; created fresh for each report."""

    by_name: dict[str, Family] = field(default_factory=dict)

    def get(self, name: str, kind: str, help_text: str) -> Family:
        fam = self.by_name.get(name)
        if fam is None:
            fam = self.by_name[name] = Family(name, kind, help_text)
        return fam


def instance_label_pairs(report: Report) -> list[tuple[str, str]]:
    info = report.instance_info
    return list(zip(INSTANCE_LABELS, (info.instance_name, info.instance_id, info.instance_type,
                                      info.instance_availability_zone, info.instance_region, info.subnet_id),
                    strict=True))


class ReportConverter:
    """Counts every report into running totals (`account`), and builds the families of the
    latest report on demand (`families`): a report that nobody scrapes costs only the
    accounting."""

    def __init__(self) -> None:
        # runtime tag -> counter family -> kind (error type, status) -> running total
        self._runtime_totals: dict[str, dict[str, dict[str, float]]] = {}
        # which collections were already counted: per (tag, pid) for execution_stats, and the
        # system groups
        self._fresh = FreshnessTracker()
        # system counters: (event, device) and device -> running total
        self._ecc_totals: dict[tuple[str, int], float] = {}
        self._repairable_totals: dict[int, float] = {}
        self._context_switches = 0.0

    def convert(self, report: Report) -> list[Family]:
        """Account for one report and return its families (the pipeline's and tests' entry)."""
        self.account(report)
        return self.families(report)

    def account(self, report: Report) -> None:
        """Add the report's new per-period counts to the counters' totals; forget what is gone."""
        live_tags: set[str] = set()
        live_keys: set[tuple[str, int]] = set()
        for entry in report.neuron_runtime_data:
            tag = entry.neuron_runtime_tag
            live_tags.add(tag)
            live_keys.add((tag, entry.pid))
            ex = entry.report.execution_stats
            if ex is None or ex.error:
                continue
            per_tag = self._runtime_totals.setdefault(tag, {})
            errors = per_tag.setdefault("execution_errors", dict.fromkeys(ERROR_TYPES, 0.0))
            statuses = per_tag.setdefault("execution_status", dict.fromkeys(EXECUTION_STATUSES, 0.0))
            if self._fresh.is_new((tag, entry.pid), ex):
                summary = ex.error_summary
                for name in ERROR_TYPES:
                    errors[name] += getattr(summary, name)
                outcomes = ex.execution_summary
                for name in EXECUTION_STATUSES:
                    statuses[name] += getattr(outcomes, name)
        sysd = report.system_data
        hw = sysd.neuron_hw_counters
        if hw is not None and not hw.error:
            new_hw = self._fresh.is_new("hw", hw)
            for dev in hw.neuron_devices:
                index = dev.neuron_device_index
                for event in ECC_EVENTS:
                    key = (event, index)
                    self._ecc_totals[key] = self._ecc_totals.get(key, 0) + (getattr(dev, event) if new_hw else 0)
                self._repairable_totals[index] = self._repairable_totals.get(index, 0) + (
                    dev.mem_ecc_repairable_uncorrected if new_hw else 0)
        vcpu = sysd.vcpu_usage
        if vcpu is not None and not vcpu.error and self._fresh.is_new("ctx", vcpu):
            self._context_switches += vcpu.context_switch_count
        # forget applications that are gone, so their series disappear
        self._fresh.forget_except({*live_keys, "hw", "ctx"})
        for tag in set(self._runtime_totals) - live_tags:
            del self._runtime_totals[tag]

    def families(self, report: Report) -> list[Family]:
        """Every family of the latest report, counters at their accounted totals."""
        fams = _Families()
        inst = instance_label_pairs(report)
        inst_str = labels(inst)
        self._instance(fams, report, inst, inst_str)
        per_device = report.neuron_hardware_info.neuroncore_per_device_count or 1
        for entry in report.neuron_runtime_data:
            self._runtime(fams, entry, inst, per_device)
        self._system(fams, report, inst_str)
        self._group_errors(fams, report, inst_str)
        return list(fams.by_name.values())

    # --- instance ---------------------------------------------------------------------

    @staticmethod
    def _instance(fams: _Families, report: Report, inst: list[tuple[str, str]], inst_str: str) -> None:
        fams.get("instance", "info", "EC2 instance neuron-monitor runs on").set(inst_str, 1)
        hw = report.neuron_hardware_info
        if not hw.error:
            lab = labels([("neuron_device_count", str(hw.neuron_device_count)),
                          ("neuroncore_per_device_count", str(hw.neuroncore_per_device_count)), *inst])
            fams.get("neuron_hardware", "info", "Neuron hardware of the instance").set(lab, 1)
            extra = labels([*inst, ("neuron_device_type", hw.neuron_device_type),
                            ("neuroncore_version", hw.neuroncore_version)])
            fams.get("neuron_device_memory_size_bytes", "gauge", "Memory of each Neuron device").set(
                extra, hw.neuron_device_memory_size)

    # --- runtime groups -----------------------------------------------------------------

    def _runtime(self, fams: _Families, entry: RuntimeEntry, inst: list[tuple[str, str]], per_device: int) -> None:
        tag = entry.neuron_runtime_tag
        rt = [*inst, ("runtime_tag", tag)]
        rt_str = labels(rt)
        groups = entry.report
        nc = groups.neuroncore_counters
        if nc is not None and not nc.error:
            util = fams.get("neuroncore_utilization_ratio", "gauge", "NeuronCore utilization, 0..1")
            flops = fams.get("neuroncore_flops", "gauge", "Floating-point operations per second of a NeuronCore")
            for core, usage in nc.neuroncores_in_use.items():
                lab = f'{rt_str},neuroncore="{escape_label(core)}",neuron_device="{_device_of(core, per_device)}"'
                util.set(lab, round(usage.neuroncore_utilization / 100.0, 6))
                flops.set(lab, usage.flops)
        vcpu = groups.neuron_runtime_vcpu_usage
        if vcpu is not None and not vcpu.error:
            fam = fams.get("neuron_runtime_vcpu_usage_ratio", "gauge",
                           "CPU use of the Neuron application, 1 = one vCPU")
            fam.add(labels([*rt, ("usage_type", "user")]), round(vcpu.vcpu_usage.user / 100.0, 6))
            fam.add(labels([*rt, ("usage_type", "system")]), round(vcpu.vcpu_usage.system / 100.0, 6))
        mem = groups.memory_used
        if mem is not None and not mem.error:
            used = mem.neuron_runtime_used_bytes
            fam = fams.get("neuron_runtime_memory_used_bytes", "gauge", "Memory used by the Neuron application")
            fam.add(labels([*rt, ("memory_location", "host")]), used.host)
            fam.add(labels([*rt, ("memory_location", "neuron_device")]), used.neuron_device)
            host_fam = fams.get("neuron_runtime_host_memory_used_bytes", "gauge",
                                "Host memory of the Neuron application by category")
            for cat, value in used.usage_breakdown.host.model_dump().items():
                host_fam.add(labels([*rt, ("category", cat)]), value)
            device_fam = fams.get("neuron_device_memory_used_bytes", "gauge",
                                  "Device memory used on each Neuron device by category")
            kind_fams = [fams.get(f"neuroncore_memory_usage_{kind}", "gauge",
                                  f"NeuronCore memory used for {kind.replace('_', ' ')}") for kind in CORE_MEMORY_KINDS]
            for core, breakdown in used.usage_breakdown.neuroncore_memory_usage.items():
                device = _device_of(core, per_device)
                core_lab = f'{rt_str},memory_location="None",neuroncore="{escape_label(core)}",neuron_device="{device}"'
                for kind, fam in zip(CORE_MEMORY_KINDS, kind_fams, strict=True):
                    value = getattr(breakdown, kind)
                    fam.add(core_lab, value)
                    device_fam.add(f'{rt_str},neuron_device="{device}",category="{kind}"', value)
            models = fams.get("neuron_runtime_loaded_models", "gauge", "Models loaded by the Neuron application")
            models.add(labels([*rt, ("state", "running")]), sum(1 for m in mem.loaded_models if m.is_running))
            models.add(labels([*rt, ("state", "loaded")]), sum(1 for m in mem.loaded_models if not m.is_running))
        ex = groups.execution_stats
        if ex is not None and not ex.error:
            self._execution(fams, entry, ex, rt, rt_str)

    def _execution(self, fams: _Families, entry: RuntimeEntry, ex: ExecutionStats, rt: list[tuple[str, str]],
                   rt_str: str) -> None:
        per_tag = self._runtime_totals.get(entry.neuron_runtime_tag, {})
        err_fam = fams.get("execution_errors", "counter", "Execution errors by type")
        status_fam = fams.get("execution_status", "counter", "Executions by outcome")
        for name, value in per_tag.get("execution_errors", {}).items():
            err_fam.set(f'{rt_str},error_type="{name}"', value)
        for name, value in per_tag.get("execution_status", {}).items():
            status_fam.set(f'{rt_str},status_type="{name}"', value)
        for fam_name, help_text, stats in (
            ("execution_latency_seconds", "Execution latency percentiles over the period",
             ex.latency_stats.total_latency),
            ("neuron_execution_device_latency_seconds", "On-device execution latency percentiles over the period",
             ex.latency_stats.device_latency),
        ):
            if stats is None:
                continue
            fam = fams.get(fam_name, "gauge", help_text)
            values = stats.model_dump()
            for p in PERCENTILES:
                fam.set(labels([*rt, ("percentile", p)]), values[p])

    # --- system groups ------------------------------------------------------------------

    def _system(self, fams: _Families, report: Report, inst_str: str) -> None:
        sysd = report.system_data
        hw = sysd.neuron_hw_counters
        if hw is not None and not hw.error:
            fam = fams.get("hardware_ecc_events", "counter", "ECC events of Neuron devices")
            repair_fam = fams.get("neuron_device_ecc_repairable_uncorrected", "counter",
                                  "Uncorrected device-memory ECC errors repaired by the device")
            for dev in hw.neuron_devices:
                index = dev.neuron_device_index
                for event in ECC_EVENTS:
                    fam.set(f'{inst_str},event_type="{event}",neuron_device_index="{index}"',
                            self._ecc_totals.get((event, index), 0))
                repair_fam.set(f'{inst_str},neuron_device_index="{index}"', self._repairable_totals.get(index, 0))
        vcpu = sysd.vcpu_usage
        if vcpu is not None and not vcpu.error:
            fams.get("system_vcpu_count", "gauge", "Number of vCPUs").set(inst_str, len(vcpu.usage_data))
            avg = vcpu.average_usage
            fam = fams.get("system_vcpu_usage_ratio", "gauge", "Average vCPU use of the host, 0..1")
            fam.set(f'{inst_str},usage_type="user"', round((avg.user + avg.nice) / 100.0, 6))
            busy_system = avg.system + avg.io_wait + avg.irq + avg.soft_irq
            fam.set(f'{inst_str},usage_type="system"', round(busy_system / 100.0, 6))
            fams.get("neuron_monitor_system_context_switches", "counter",
                     "Context switches of the host counted by neuron-monitor").set(inst_str, self._context_switches)
        mem = sysd.memory_info
        if mem is not None and not mem.error:
            for name, value in (("system_memory_total_bytes", mem.memory_total_bytes),
                                ("system_memory_used_bytes", mem.memory_used_bytes),
                                ("system_swap_total_bytes", mem.swap_total_bytes),
                                ("system_swap_used_bytes", mem.swap_used_bytes)):
                fams.get(name, "gauge", name.replace("_", " ")).set(inst_str, value)


    @staticmethod
    def _group_errors(fams: _Families, report: Report, inst_str: str) -> None:
        """How many objects of each group carry an error in this report (0 when all is well)."""
        counts = dict.fromkeys((*RUNTIME_GROUPS, *SYSTEM_GROUPS), 0)
        for entry in report.neuron_runtime_data:
            for name, group in _groups(entry):
                counts[name] += bool(group.error)
        for name in SYSTEM_GROUPS:
            group = getattr(report.system_data, name)
            if group is not None:
                counts[name] += bool(group.error)
        fam = fams.get("neuron_monitor_group_errors", "gauge",
                       "Metric-group objects whose collection failed in the latest report")
        for name, count in counts.items():
            fam.set(f'{inst_str},group="{name}"', count)
        failed_apps = sum(1 for e in report.neuron_runtime_data if e.error)
        fams.get("neuron_monitor_runtime_errors", "gauge",
                 "Neuron applications that could not be fully inspected").set(inst_str, failed_apps)
        hw_failed = int(bool(report.neuron_hardware_info.error))
        fams.get("neuron_monitor_hardware_info_error", "gauge",
                 "1 when the Neuron hardware could not be read").set(inst_str, hw_failed)


def _groups(entry: RuntimeEntry) -> Iterable[tuple[str, MetricGroup]]:
    for name in RUNTIME_GROUPS:
        group = getattr(entry.report, name)
        if group is not None:
            yield name, group



def _device_of(core: str, per_device: int) -> str:
    try:
        return str(int(core) // per_device)
    except ValueError:  # a report from elsewhere with a non-numeric core key
        return ""
