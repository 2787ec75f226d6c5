"""The scheduler against a fake backend and a virtual clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from neuron_monitor.backends.base import AppReading, Need
from neuron_monitor.collectors.base import SystemCollector
from neuron_monitor.config import parse_config
from neuron_monitor.report import InstanceInfo, MemoryInfo, MetricGroup, Report
from neuron_monitor.scheduler import Scheduler
from neuron_monitor.selfstats import DaemonStats
from tests.fakes import FakeBackend, core


class VirtualClock:
    """Time moves only when the scheduler sleeps (plus a simulated wake-up lateness)."""

    def __init__(self, lateness: float = 0.0005) -> None:
        self.t = 1000.0
        self.lateness = lateness

    def now(self) -> float:
        return self.t

    async def sleep_until(self, deadline: float, wake: asyncio.Event) -> None:
        if deadline > self.t:
            self.t = deadline + self.lateness
        await asyncio.sleep(0)


async def inline(func: Callable[..., Any], *args: Any) -> Any:
    return func(*args)


def make(backend: FakeBackend, config: dict[str, Any], clock: VirtualClock,
         reports: list[tuple[float, Report]]) -> Scheduler:
    return Scheduler(backend, parse_config(config), lambda r: reports.append((clock.t, r)), DaemonStats(),
                     InstanceInfo(), clock=clock, offload=inline)


async def test_thousand_one_second_periods_do_not_drift() -> None:
    clock = VirtualClock()
    backend = FakeBackend()

    def slow_read(now: float) -> None:
        clock.t += 0.003  # every collection "takes" 3 ms

    backend.on_snapshot = slow_read
    reports: list[tuple[float, Report]] = []
    scheduler = make(backend, {"period": "1s", "system_metrics": [{"type": "memory_info"}]}, clock, reports)
    stop = asyncio.Event()

    def publish(report: Report) -> None:
        reports.append((clock.t, report))
        if len(reports) == 1001:  # the first report after 0.1 s, then one a second
            stop.set()

    scheduler._publish = publish
    await scheduler.run(stop)
    start = 1000.0
    last_time, last = reports[-1]
    assert abs(last_time - (start + 1000.0)) < 0.005  # 1,000 periods end within a few ms of 1,000 s
    periods = [r.system_data.memory_info.period for _, r in reports[2:] if r.system_data.memory_info]
    assert all(abs(p - 1.0) < 0.002 for p in periods)
    assert last.system_data.memory_info is not None


async def test_groups_run_on_their_own_periods() -> None:
    clock = VirtualClock(lateness=0)
    backend = FakeBackend(apps=[AppReading(1, "a", (0,))], cores={0: core(0), 1: core(1)})
    reports: list[tuple[float, Report]] = []
    config = {"period": "1s", "neuron_runtimes": [{"metrics": [{"type": "neuroncore_counters", "period": "2s"}]}],
              "system_metrics": [{"type": "memory_info", "period": "500ms"}]}
    scheduler = make(backend, config, clock, reports)
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    while len(reports) < 9:
        await asyncio.sleep(0)
    stop.set()
    await task
    times = [round(t - 1000.0, 3) for t, _ in reports]
    assert times == [0.1, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]
    nc_periods = [
        nc.period for _, r in reports
        if r.neuron_runtime_data and (nc := r.neuron_runtime_data[0].report.neuroncore_counters) is not None
    ]
    assert nc_periods[:3] == [0.1, 0.1, 0.1]  # unchanged until the group runs again
    assert nc_periods[-1] == 2.0
    # the backend was asked only for what the due groups need (asked[0] is the baseline)
    assert frozenset({Need.CORES, Need.APPLICATIONS}) <= backend.asked[5]  # t=2.0: both due
    assert Need.CORES not in backend.asked[4]  # t=1.5: only memory_info


class Exploding(SystemCollector):
    group = "memory_info"

    def collect(self, snapshot: Any, period: float) -> MetricGroup:
        raise OSError("memory counters on fire")


async def test_a_failing_group_fills_its_error_and_others_continue() -> None:
    clock = VirtualClock()
    backend = FakeBackend(apps=[AppReading(1, "a", (0,))], cores={0: core(0)})
    reports: list[tuple[float, Report]] = []
    scheduler = make(backend, {"period": "1s", "system_metrics": [{"type": "memory_info"}, {"type": "vcpu_usage"}],
                               "neuron_runtimes": [{"metrics": [{"type": "neuroncore_counters"}]}]}, clock, reports)
    for job in scheduler.jobs:
        if job.group == "memory_info":
            job.collector = Exploding()
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    while len(reports) < 3:
        await asyncio.sleep(0)
    stop.set()
    await task
    report = reports[-1][1]
    assert isinstance(report.system_data.memory_info, MemoryInfo)
    assert report.system_data.memory_info.error == "OSError: memory counters on fire"
    assert report.system_data.vcpu_usage is not None and report.system_data.vcpu_usage.error == ""
    assert report.neuron_runtime_data[0].report.neuroncore_counters is not None
    assert scheduler._stats.groups["memory_info"].errors_total >= 2


async def test_applications_come_and_go_and_filters_apply() -> None:
    clock = VirtualClock()
    backend = FakeBackend(apps=[AppReading(1, "train-a", (0,)), AppReading(2, "infer-b", (1,))],
                          cores={0: core(0), 1: core(1)})
    reports: list[tuple[float, Report]] = []
    config = {"period": "1s", "neuron_runtimes": [
        {"tag_filter": "train.*", "metrics": [{"type": "neuroncore_counters"}]},
        {"tag_filter": "infer.*", "metrics": [{"type": "execution_stats"}]}]}
    scheduler = make(backend, config, clock, reports)
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    while len(reports) < 2:
        await asyncio.sleep(0)
    first = reports[-1][1]
    groups = {e.pid: set(e.report.model_dump()) for e in first.neuron_runtime_data}
    assert groups == {1: {"neuroncore_counters"}, 2: {"execution_stats"}}
    backend.apps = [AppReading(2, "infer-b", (1,)), AppReading(3, "other", (0,))]  # 1 exits, 3 unmatched
    n = len(reports)
    while len(reports) < n + 1:
        await asyncio.sleep(0)
    stop.set()
    await task
    assert [e.pid for e in reports[-1][1].neuron_runtime_data] == [2]


async def test_reload_changes_groups_at_next_cycle() -> None:
    clock = VirtualClock()
    backend = FakeBackend()
    reports: list[tuple[float, Report]] = []
    scheduler = make(backend, {"period": "1s", "system_metrics": [{"type": "memory_info"}]}, clock, reports)
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    while len(reports) < 2:
        await asyncio.sleep(0)
    scheduler.reload(parse_config({"period": "1s", "system_metrics": [{"type": "vcpu_usage"}]}))
    n = len(reports)
    while len(reports) < n + 3:
        await asyncio.sleep(0)
    stop.set()
    await task
    last = reports[-1][1].system_data
    assert last.memory_info is None
    assert last.vcpu_usage is not None and last.vcpu_usage.period > 0
