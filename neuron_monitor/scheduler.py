"""The scheduler owns time: it runs each metric group on its own period and merges the
results into the latest report.

Each (group, period) pair is a *job*.  The loop sleeps until the earliest job is due,
takes one backend snapshot covering what every due job needs, runs the due collectors,
stores their groups, builds the report and lets the exporters prepare it (encode, render),
all in one call off the event loop (so a Prometheus scrape is never stuck behind a file
read; one thread hand-off per cycle, as the collectors gain nothing from running in
parallel under the GIL), and then publishes the report on the event loop.  While that call
runs Python, the interpreter's switch interval is short (`threads.short_switch_interval`),
so a scrape waits at most half a millisecond for its turn.  Due times are anchored at
start-up (`t0 + k * period`), never `last + period`, so periods do not drift; a cycle
that overruns skips the missed slots instead of bunching up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from neuron_monitor.backends.base import AppReading, DeviceBackend, HardwareReading, Need, Snapshot
from neuron_monitor.collectors import RUNTIME_COLLECTORS, SYSTEM_COLLECTORS, RuntimeCollector, SystemCollector
from neuron_monitor.config import MonitorConfig
from neuron_monitor.report import (
    ExecutionStats,
    InstanceInfo,
    MemoryInfo,
    MemoryUsed,
    MetricGroup,
    NeuronCoreCounters,
    NeuronHardwareInfo,
    NeuronHwCounters,
    Report,
    RuntimeEntry,
    RuntimeGroups,
    RuntimeVcpuUsage,
    SystemData,
    VcpuUsage,
)
from neuron_monitor.selfstats import DaemonStats
from neuron_monitor.threads import short_switch_interval

log = logging.getLogger(__name__)
T = TypeVar("T")

# The first report comes this soon after start-up (or after one period, if shorter): long
# enough to measure rates over, short enough that users see output at once.
FIRST_REPORT_DELAY_S = 0.1
# Event-loop timers may fire a little early (uvloop rounds to milliseconds): a job due
# within this much of now counts as due, rather than costing an extra wake-up.
DUE_TOLERANCE_S = 0.002

GROUP_MODELS: dict[str, type[MetricGroup]] = {
    "neuroncore_counters": NeuronCoreCounters,
    "execution_stats": ExecutionStats,
    "memory_used": MemoryUsed,
    "neuron_runtime_vcpu_usage": RuntimeVcpuUsage,
    "neuron_hw_counters": NeuronHwCounters,
    "vcpu_usage": VcpuUsage,
    "memory_info": MemoryInfo,
}


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep_until(self, deadline: float, wake: asyncio.Event) -> None:
        """Return at `deadline` or as soon as `wake` is set."""
        ...


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()

    async def sleep_until(self, deadline: float, wake: asyncio.Event) -> None:
        delay = deadline - time.monotonic()
        if delay <= 0 or wake.is_set():
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), delay)


async def run_in_thread(func: Callable[..., T], *args: Any) -> T:
    return await asyncio.to_thread(func, *args)


@dataclass(eq=False)
class Job:
    group: str
    period: float
    collector: RuntimeCollector | SystemCollector
    next_due: float = 0.0
    last_at: float | None = None

    @property
    def is_runtime(self) -> bool:
        return isinstance(self.collector, RuntimeCollector)


@dataclass
class _RuntimeState:
    tag: str
    error: str = ""
    groups: dict[str, MetricGroup] = field(default_factory=dict)


def hardware_info(hw: HardwareReading) -> NeuronHardwareInfo:
    return NeuronHardwareInfo(
        neuron_device_type=hw.device_type,
        neuroncore_version=hw.core_version,
        neuron_device_count=hw.device_count,
        neuron_device_memory_size=hw.device_memory_size,
        neuroncore_per_device_count=hw.logical_cores_per_device if hw.device_count else 0,
        logical_neuroncore_config=hw.logical_core_config,
        error=hw.error,
    )


def build_jobs(config: MonitorConfig, previous: Sequence[Job] = ()) -> list[Job]:
    """One job per (group, period); a job that already existed keeps its collector state."""
    keep = {(j.group, j.period): j for j in previous}
    wanted: dict[tuple[str, float], bool] = {}
    for selection in config.runtimes:
        for group, period in selection.groups.items():
            wanted[(group, period)] = True
    for group, period in config.system_groups.items():
        wanted[(group, period)] = False
    jobs = []
    for (group, period), runtime in wanted.items():
        old = keep.get((group, period))
        if old is not None:
            jobs.append(old)
            continue
        factory = RUNTIME_COLLECTORS[group] if runtime else SYSTEM_COLLECTORS[group]
        jobs.append(Job(group, period, factory()))
    return jobs


class Scheduler:
    def __init__(
        self,
        backend: DeviceBackend,
        config: MonitorConfig,
        publish: Callable[[Report], None],
        stats: DaemonStats,
        instance_info: InstanceInfo,
        *,
        clock: Clock | None = None,
        first_report_delay: float = FIRST_REPORT_DELAY_S,
        offload: Callable[..., Any] = run_in_thread,
        prepare: Callable[[Report], None] | None = None,
    ) -> None:
        self._backend = backend
        self._config = config
        self._publish = publish
        self._stats = stats
        self._instance_info = instance_info
        self._clock: Clock = clock or MonotonicClock()
        self._first_delay = first_report_delay
        self._offload = offload
        self._prepare = prepare
        self._jobs = build_jobs(config)
        self._pending_config: MonitorConfig | None = None
        self._runtime: dict[int, _RuntimeState] = {}
        self._system: dict[str, MetricGroup] = {}
        self._t0 = 0.0
        self._collections = 0  # numbers each collection (see MetricGroup.collection)
        self._stats.shortest_period_s = min(config.all_periods(), default=5.0)

    @property
    def config(self) -> MonitorConfig:
        return self._config

    @property
    def jobs(self) -> list[Job]:
        return list(self._jobs)

    def reload(self, config: MonitorConfig) -> None:
        """Use a new config from the next cycle on (collector state of unchanged jobs is kept)."""
        self._pending_config = config

    # --- the loop -------------------------------------------------------------------

    async def run(self, stop: asyncio.Event, once: bool = False) -> None:
        """Collect until `stop` is set; with `once`, collect every group once and return."""
        await self._prime()
        while not stop.is_set():
            self._apply_pending_config()
            deadline = min(job.next_due for job in self._jobs) if self._jobs else self._t0 + 5.0
            await self._clock.sleep_until(deadline, stop)
            if stop.is_set():
                break
            if self._clock.now() + DUE_TOLERANCE_S < deadline:
                continue  # woke early: nothing is due yet
            await self.cycle()
            # Let every other task run between cycles, even with a clock and an offload that
            # never suspend (tests, virtual time): the scheduler must not starve the loop.
            await asyncio.sleep(0)
            if once and all(job.last_at is not None and job.last_at > self._t0 for job in self._jobs):
                break

    async def _prime(self) -> None:
        """Take the baseline every job's deltas start from; schedule the first report."""
        self._t0 = self._clock.now()
        snapshot, _ = await self._offload(self._collect, self._jobs, self._t0)
        if snapshot.applications is not None:
            self._prune(snapshot.applications)
        for job in self._jobs:
            job.last_at = snapshot.taken_at
            job.next_due = self._t0 + min(self._first_delay, job.period)

    def _apply_pending_config(self) -> None:
        config, self._pending_config = self._pending_config, None
        if config is None:
            return
        now = self._clock.now()
        old = {id(j) for j in self._jobs}
        self._jobs = build_jobs(config, self._jobs)
        self._config = config
        self._stats.shortest_period_s = min(config.all_periods(), default=5.0)
        for job in self._jobs:
            if id(job) not in old:  # a new job: its first collection gives a baseline only
                job.last_at = None
                job.next_due = now
        live_groups = {j.group for j in self._jobs}
        for name in list(self._system):
            if name not in live_groups:
                del self._system[name]
        for state in self._runtime.values():
            for name in list(state.groups):
                if name not in live_groups:
                    del state.groups[name]
        log.info("config %s in effect: %d jobs", config.source, len(self._jobs))

    @staticmethod
    def _needs(jobs: Sequence[Job]) -> frozenset[Need]:
        needs: set[Need] = set()
        for job in jobs:
            needs |= job.collector.needs
            if job.is_runtime:
                needs.add(Need.APPLICATIONS)
        return frozenset(needs)

    async def cycle(self) -> Report:
        """Collect every due job once, publish and return the report."""
        started = time.perf_counter()
        now = self._clock.now()
        due = [job for job in self._jobs if job.next_due <= now + DUE_TOLERANCE_S]
        report: Report = await self._offload(self._collect_and_report, due, now)
        self._stats.last_cycle_duration_s = time.perf_counter() - started
        self._stats.reports_total += 1
        self._stats.last_report_monotonic = time.monotonic()
        self._publish(report)
        return report

    def _collect_and_report(self, due: Sequence[Job], now: float) -> Report:
        """A whole cycle but the publishing, in one call off the event loop (one thread
        hand-off per cycle, not one per group): collect the due jobs, store their groups,
        build the report and let the exporters prepare it (encode, render)."""
        with short_switch_interval():
            if due:
                snapshot, results = self._collect(due, now)
                if snapshot.applications is not None:
                    self._prune(snapshot.applications)
                for job, result in zip(due, results, strict=True):
                    if job.last_at is not None:  # a new job's first collection is its baseline only
                        self._store(job, result)
                    job.last_at = snapshot.taken_at
                    k = math.floor((now + DUE_TOLERANCE_S - self._t0) / job.period) + 1
                    job.next_due = self._t0 + k * job.period
            report = self.build_report()
            if self._prepare is not None:
                self._prepare(report)
            return report

    def _collect(
        self, jobs: Sequence[Job], now: float
    ) -> tuple[Snapshot, list[dict[int, MetricGroup] | MetricGroup]]:
        """One snapshot for every due job, then each job's collector."""
        with short_switch_interval():
            try:
                snapshot = self._backend.snapshot(self._needs(jobs), now)
            except Exception as exc:  # a backend must not raise, but if it does: every due group errs
                log.exception("backend snapshot failed")
                snapshot = Snapshot(taken_at=now, hardware=self._backend.hardware(),
                                    errors={n: f"backend failed: {exc}" for n in Need})
            apps = list(snapshot.applications or ())
            return snapshot, [self._run_job(job, snapshot, apps) for job in jobs]

    def _run_job(
        self, job: Job, snapshot: Snapshot, apps: Sequence[AppReading]
    ) -> dict[int, MetricGroup] | MetricGroup:
        started = time.perf_counter()
        period = round(snapshot.taken_at - job.last_at, 9) if job.last_at is not None else 0.0
        model = GROUP_MODELS[job.group]
        stats = self._stats.group(job.group)
        result: dict[int, MetricGroup] | MetricGroup
        try:
            if isinstance(job.collector, RuntimeCollector):
                mine = [a for a in apps if self._config.groups_for_tag(a.tag).get(job.group) == job.period]
                result = job.collector.collect(snapshot, mine, period)
            else:
                result = job.collector.collect(snapshot, period)
        except Exception as exc:  # one failing group never stops the others
            log.warning("collecting %s failed: %s", job.group, exc, exc_info=log.isEnabledFor(logging.DEBUG))
            message = f"{type(exc).__name__}: {exc}"
            if isinstance(job.collector, RuntimeCollector):
                result = {a.pid: model(period=period, error=message) for a in apps}
            else:
                result = model(period=period, error=message)
        self._collections += 1
        for group in result.values() if isinstance(result, dict) else (result,):
            group.mark_collection(self._collections)
        stats.last_duration_s = time.perf_counter() - started
        stats.collections_total += 1
        errors = [g.error for g in result.values()] if isinstance(result, dict) else [result.error]
        failed = [e for e in errors if e]
        if failed:
            stats.errors_total += 1
            stats.last_error = failed[0]
        return result

    def _store(self, job: Job, result: dict[int, MetricGroup] | MetricGroup) -> None:
        if isinstance(result, dict):
            for pid, group in result.items():
                state = self._runtime.get(pid)
                if state is not None:
                    state.groups[job.group] = group
        else:
            self._system[job.group] = result

    def _prune(self, apps: Sequence[AppReading]) -> None:
        """Applications that exited (or no longer match any filter) leave the report."""
        live: dict[int, AppReading] = {}
        for app in apps:
            if self._config.groups_for_tag(app.tag):
                live[app.pid] = app
        for pid in list(self._runtime):
            seen = live.get(pid)
            if seen is None or seen.tag != self._runtime[pid].tag:
                del self._runtime[pid]
        for pid, app in live.items():
            known = self._runtime.get(pid)
            if known is None:
                self._runtime[pid] = _RuntimeState(tag=app.tag, error=app.error)
            else:
                known.error = app.error

    def build_report(self) -> Report:
        entries = [
            RuntimeEntry(pid=pid, neuron_runtime_tag=state.tag, error=state.error,
                         report=RuntimeGroups(**state.groups))
            for pid, state in sorted(self._runtime.items())
        ]
        return Report(
            neuron_runtime_data=entries,
            system_data=SystemData(**self._system),
            instance_info=self._instance_info,
            neuron_hardware_info=hardware_info(self._backend.hardware()),
        )
