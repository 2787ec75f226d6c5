"""Each collector against hand-made snapshots."""

from __future__ import annotations

import os
from pathlib import Path

from neuron_monitor.backends.base import (
    AppReading,
    DeviceReading,
    LatencyWindow,
    ModelReading,
    Need,
    Snapshot,
    SubgraphReading,
)
from neuron_monitor.collectors.execution import ExecutionStatsCollector
from neuron_monitor.collectors.host import MemoryInfoCollector, VcpuUsageCollector
from neuron_monitor.collectors.hw_counters import HwCountersCollector
from neuron_monitor.collectors.memory import MemoryUsedCollector
from neuron_monitor.collectors.neuroncore import NeuronCoreCountersCollector
from neuron_monitor.collectors.runtime_vcpu import RuntimeVcpuCollector
from neuron_monitor.report import (
    ExecutionStats,
    MemoryInfo,
    MemoryUsed,
    NeuronCoreCounters,
    RuntimeVcpuUsage,
    VcpuUsage,
)
from tests.fakes import TRN1_LIKE, TRN2_LIKE, core


def snap(t: float, cores=None, apps=(), devices=None, hw=TRN1_LIKE, errors=None) -> Snapshot:  # type: ignore[no-untyped-def]
    return Snapshot(taken_at=t, hardware=hw, cores=cores, devices=devices, applications=list(apps),
                    errors=errors or {})


APP = AppReading(pid=42, tag="train", cores=(0, 1))


def test_neuroncore_utilization_and_flops_per_second() -> None:
    collector = NeuronCoreCountersCollector()
    collector.collect(snap(0, {0: core(0), 1: core(1)}), [APP], 0.0)
    cores = {0: core(0, busy_us=500_000, flops=4_000), 1: core(1, busy_us=2_000_000, flops=0)}
    group = collector.collect(snap(2.0, cores), [APP], 2.0)[42]
    assert isinstance(group, NeuronCoreCounters)
    assert group.neuroncores_in_use["0"].neuroncore_utilization == 25.0
    assert group.neuroncores_in_use["0"].flops == 2_000
    assert group.neuroncores_in_use["1"].neuroncore_utilization == 100.0
    assert group.neuroncores_in_use["0"].v3d is None
    assert group.error == ""


def test_neuroncore_counter_reset_never_negative() -> None:
    collector = NeuronCoreCountersCollector()
    collector.collect(snap(0, {0: core(0, busy_us=10**9, flops=10**12), 1: core(1)}), [APP], 0.0)
    # driver reload: counters restart from zero
    group = collector.collect(snap(1, {0: core(0, busy_us=300_000, flops=100), 1: core(1)}), [APP], 1.0)[42]
    assert isinstance(group, NeuronCoreCounters)
    assert group.neuroncores_in_use["0"].neuroncore_utilization == 30.0
    assert group.neuroncores_in_use["0"].flops == 100


def test_trn2_logical_cores_report_v3d() -> None:
    app = AppReading(pid=7, tag="llm", cores=(1,))  # logical core 1 = physical 2 and 3
    collector = NeuronCoreCountersCollector()
    collector.collect(snap(0, {2: core(2), 3: core(3)}, hw=TRN2_LIKE), [app], 0.0)
    group = collector.collect(snap(1, {2: core(2, busy_us=400_000), 3: core(3, busy_us=600_000)}, hw=TRN2_LIKE),
                              [app], 1.0)[7]
    assert isinstance(group, NeuronCoreCounters)
    usage = group.neuroncores_in_use["1"]
    assert usage.neuroncore_utilization == 50.0
    assert usage.v3d is not None
    assert {k: v.neuroncore_utilization for k, v in usage.v3d.items()} == {"nc_v3.2": 40.0, "nc_v3.3": 60.0}


def test_execution_stats_maps_status_counters_and_percentiles() -> None:
    collector = ExecutionStatsCollector()
    window0 = LatencyWindow(end_seq=5, total=(9.0,) * 5, device=(8.0,) * 5)
    app0 = AppReading(pid=1, tag="a", cores=(0,), latency=window0)
    zero = {"execute_completed_with_num_error": 0, "timeout": 0, "hw_error": 0}
    collector.collect(snap(0, {0: core(0, status={"success": 100, **zero})}), [app0], 0.0)
    window1 = LatencyWindow(end_seq=9, total=(9.0,) * 5 + (0.01, 0.02, 0.03, 0.04),
                            device=(8.0,) * 5 + (0.005, 0.01, 0.015, 0.02))
    app1 = AppReading(pid=1, tag="a", cores=(0,), latency=window1)
    status = {"success": 110, "execute_completed_with_num_error": 2, "timeout": 1, "hw_error": 3}
    group = collector.collect(snap(1, {0: core(0, status=status)}), [app1], 1.0)[1]
    assert isinstance(group, ExecutionStats)
    assert group.execution_summary.completed == 10
    assert group.execution_summary.completed_with_num_err == 2
    assert group.execution_summary.timed_out == 1
    assert group.error_summary.numerical == 2
    assert group.error_summary.hardware == 3
    assert group.error_summary.transient == 1
    total = group.latency_stats.total_latency
    assert total is not None
    assert (total.p0, total.p100) == (0.01, 0.04)
    assert group.latency_stats.device_latency is not None
    # nothing ran since: percentiles are null, counts zero
    quiet = collector.collect(snap(2, {0: core(0, status=status)}), [app1], 1.0)[1]
    assert isinstance(quiet, ExecutionStats)
    assert quiet.latency_stats.total_latency is None
    assert quiet.execution_summary.completed == 0
    assert '"total_latency":null' in quiet.model_dump_json()


def test_execution_stats_without_core_counters_reports_error() -> None:
    collector = ExecutionStatsCollector()
    group = collector.collect(snap(0, None, errors={Need.CORES: "neuron0 vanished"}), [APP], 1.0)[42]
    assert group.error == "neuron0 vanished"


def test_memory_used_totals_equal_breakdowns() -> None:
    sg = SubgraphReading(name="sg_00", core=0, device=0, host={"application_memory": 10, "dma_buffers": 5},
                         device_memory={"constants": 100, "model_code": 20})
    app = AppReading(pid=3, tag="m", cores=(0, 1),
                     host_memory={"application_memory": 1000, "constants": 0, "dma_buffers": 24, "tensors": 8},
                     models=(ModelReading("bert", "u" * 32, 10005, True, (sg,)),))
    cores = {0: core(0, memory={"constants": 100, "model_code": 20, "tensors": 7, "driver_memory": 99}),
             1: core(1, memory={"runtime_memory": 4, "model_shared_scratchpad": 3})}
    group = MemoryUsedCollector().collect(snap(0, cores), [app], 1.0)[3]
    assert isinstance(group, MemoryUsed)
    used = group.neuron_runtime_used_bytes
    assert used.host == 1032
    assert used.neuron_device == 127 + 7
    assert used.neuron_device == sum(b.total() for b in used.usage_breakdown.neuroncore_memory_usage.values())
    model = group.loaded_models[0]
    assert model.subgraphs["sg_00"].memory_used_bytes.neuron_device == 120
    assert model.subgraphs["sg_00"].memory_used_bytes.host == 15


def test_runtime_vcpu_percent_of_one_cpu() -> None:
    collector = RuntimeVcpuCollector()
    collector.collect(snap(0), [AppReading(1, "a", (), cpu_user_s=10.0, cpu_system_s=1.0)], 0.0)
    group = collector.collect(snap(2), [AppReading(1, "a", (), cpu_user_s=13.0, cpu_system_s=1.5)], 2.0)[1]
    assert isinstance(group, RuntimeVcpuUsage)
    assert (group.vcpu_usage.user, group.vcpu_usage.system) == (150.0, 25.0)
    missing = collector.collect(snap(3), [AppReading(1, "a", (), error="permission denied")], 1.0)[1]
    assert missing.error == "permission denied"


def test_hw_counters_per_period_and_device_errors() -> None:
    collector = HwCountersCollector()
    collector.collect(snap(0, devices=[DeviceReading(0, mem_ecc_uncorrected=5), DeviceReading(1)]), 0.0)
    group = collector.collect(snap(1, devices=[DeviceReading(0, mem_ecc_uncorrected=7, sram_ecc_uncorrected=1),
                                              DeviceReading(1, error="neuron1: stats/hardware unreadable")]), 1.0)
    assert group.model_dump()["neuron_devices"] == [{"neuron_device_index": 0, "mem_ecc_corrected": 0,
                                                     "mem_ecc_uncorrected": 2, "sram_ecc_corrected": 0,
                                                     "sram_ecc_uncorrected": 1, "mem_ecc_repairable_uncorrected": 0}]
    assert "neuron1" in group.error


class _Times:
    def __init__(self, **values: float) -> None:
        self.__dict__.update(values)


def test_vcpu_usage_percentages_and_context_switches() -> None:
    readings = iter([
        [_Times(user=0, nice=0, system=0, idle=0, iowait=0, irq=0, softirq=0)] * 2,
        [_Times(user=30, nice=0, system=10, idle=60, iowait=0, irq=0, softirq=0),
         _Times(user=0, nice=0, system=0, idle=100, iowait=0, irq=0, softirq=0)],
    ])
    switches = iter([1000, 1500])
    collector = VcpuUsageCollector(per_cpu=lambda: next(readings), ctx_switches=lambda: next(switches))
    group = collector.collect(snap(1), 1.0)
    assert isinstance(group, VcpuUsage)
    assert group.usage_data["0"].user == 30.0
    assert group.usage_data["1"].idle == 100.0
    assert group.average_usage.user == 15.0
    assert group.context_switch_count == 500


def test_memory_info_reads_the_host() -> None:
    group = MemoryInfoCollector().collect(snap(0), 1.0)
    data = group.model_dump()
    assert data["memory_total_bytes"] > data["memory_used_bytes"] > 0


def test_proc_stat_and_meminfo_agree_with_psutil() -> None:
    import psutil

    from neuron_monitor.collectors.host import ProcStat, read_meminfo

    stat = ProcStat()
    mine = stat.per_cpu()
    theirs = psutil.cpu_times(percpu=True)
    assert len(mine) == len(theirs)
    fields = ("user", "nice", "system", "idle", "iowait", "irq", "softirq")
    # read a moment apart: the counters move by a tick or two at most
    assert all(abs(m - getattr(t, f)) < 0.5 for m_cpu, t in zip(mine, theirs, strict=True)
               for m, f in zip(m_cpu, fields, strict=True))
    assert abs(stat.ctx_switches() - psutil.cpu_stats().ctx_switches) < 100_000
    assert read_meminfo()["MemTotal"] == psutil.virtual_memory().total


def test_proc_stat_parsing_of_a_captured_file(tmp_path: Path) -> None:
    from neuron_monitor.collectors.host import ProcStat

    stat = tmp_path / "stat"
    stat.write_text("cpu  900 10 300 8000 40 0 30 5 0 0\n"
                    "cpu0 400 5 100 4000 20 0 10 5 0 0\n"
                    "cpu1 500 5 200 4000 20 0 20 0 0 0\n"
                    "intr 123 4 5\nctxt 987654\nbtime 1700000000\nprocesses 4242\n")
    reader = ProcStat(str(stat))
    ticks = os.sysconf("SC_CLK_TCK")
    cpus = reader.per_cpu()
    assert cpus == [tuple(v / ticks for v in (400, 5, 100, 4000, 20, 0, 10)),
                    tuple(v / ticks for v in (500, 5, 200, 4000, 20, 0, 20))]  # steal/guest left out
    assert reader.ctx_switches() == 987654


def test_memory_info_without_memavailable(tmp_path: Path) -> None:
    from neuron_monitor.collectors.host import read_meminfo

    meminfo = tmp_path / "meminfo"  # a kernel older than 3.14 has no MemAvailable
    meminfo.write_text("MemTotal:  1000 kB\nMemFree:  200 kB\nBuffers:  100 kB\nCached:  300 kB\n"
                       "SwapTotal:  500 kB\nSwapFree:  400 kB\nHugePages_Total:  0\n")
    group = MemoryInfoCollector(meminfo=lambda: read_meminfo(str(meminfo))).collect(snap(0), 1.0)
    assert isinstance(group, MemoryInfo)
    assert (group.memory_total_bytes, group.memory_used_bytes) == (1_024_000, 409_600)
    assert (group.swap_total_bytes, group.swap_used_bytes) == (512_000, 102_400)
