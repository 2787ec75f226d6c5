"""A deterministic simulation of Neuron devices and the applications running on them.

Time advances in fixed 100 ms steps from the start time and every random draw comes from
one seeded generator in a fixed order, so the state at time t is the same however often
(or rarely) it is looked at.  The state is kept the way the driver keeps it: cumulative
per-core counters (busy time, flops, status outcomes), per-device ECC counters, memory
by category; plus what only the runtime knows (latencies, loaded models, CPU use).

Counts agree by construction:
- every execution an application runs increments exactly one status counter, on the
  first physical core of the logical core it ran on (`success` or one error counter);
- its device time goes into the busy time of the logical core's physical cores (the
  second physical core of a trn2 logical core a few percent less), through a bounded
  backlog so that a core is never busy more than 100 % of a step;
- device latency is a share (<= 1) of total latency;
- memory: a core's device memory is the driver's plus, for each application using it,
  the runtime's share and its models' subgraphs; device host memory is the driver's plus
  the host memory of the applications' subgraphs on that device.

Cost: executions are counted, not simulated one by one.  Each step draws at most
`SAMPLES_PER_APP_STEP` latency samples per application (from a precomputed quantile
table: one uniform draw each), and failures and ECC events are scheduled by drawing the
gap to the next one, so their cost is per event, not per execution.
"""

from __future__ import annotations

import bisect
import math
import random
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

from neuron_monitor.backends.base import (
    DEVICE_MEMORY_CATEGORIES,
    HOST_MEMORY_CATEGORIES,
    LatencyWindow,
    ModelReading,
    SubgraphReading,
)
from neuron_monitor.backends.scenario import (
    APP_CORE_DEVICE_MEMORY,
    DRIVER_HOST_MEMORY_PER_DEVICE,
    DRIVER_MEMORY_PER_CORE,
    ApplicationSpec,
    ModelSpec,
    Scenario,
)
from neuron_monitor.catalogue import InstanceType
from neuron_monitor.execution_mapping import STATUS_COUNTERS

STEP_S = 0.1
STEP_US = 100_000
LATENCY_WINDOW = 4096
SAMPLES_PER_APP_STEP = 32
MAX_BACKLOG_US = 5_000_000  # device work queued beyond a step; the rest is dropped like a full queue
QUANTILES = 1024  # latency samples come from this many quantiles of the distribution
DEVICE_SHARE_JITTER = 0.04  # the device share of a step's samples is up to this fraction lower
ECC_NAMES: tuple[str, ...] = (
    "mem_ecc_corrected",
    "mem_ecc_uncorrected",
    "sram_ecc_corrected",
    "sram_ecc_uncorrected",
    "mem_ecc_repairable_uncorrected",
)
FIRST_PID = 10_000
COUNTER_LIMIT = 1 << 64  # the driver's counters are u64: readers see values modulo this
MAX_FAILURE_GAP = 2**62  # executions; "never" for any rate a float can tell from 0
_STANDARD_NORMAL = tuple(NormalDist().inv_cdf((i + 0.5) / QUANTILES) for i in range(QUANTILES))


@dataclass
class CoreState:
    """One physical core's cumulative counters and current memory (the driver's view)."""

    core: int  # global physical index
    device: int
    busy_us: int = 0  # nc_time_in_use
    flops: int = 0  # flop_count
    status: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATUS_COUNTERS, 0))
    device_memory: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DEVICE_MEMORY_CATEGORIES, 0))
    host_memory: int = 0  # bytes of host memory of the subgraphs on this core
    model_load_count: int = 0  # models loaded on this core so far

    @property
    def executions(self) -> int:
        return sum(self.status.values())


@dataclass
class DeviceState:
    device: int
    ecc: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ECC_NAMES, 0))
    host_memory: dict[str, int] = field(default_factory=lambda: dict.fromkeys(HOST_MEMORY_CATEGORIES, 0))


@dataclass
class ModelRun:
    """A model of one application, with what its executions need precomputed."""

    spec: ModelSpec
    uuid: str
    model_id: int
    latency_table: tuple[float, ...]  # total latency quantiles, seconds
    per_step: float  # executions per step at nominal load (0 when the model is not running)
    device_share: float
    half_flops: int  # MACs per execution: flop_count grows by twice this
    carry: float = 0.0  # fraction of an execution carried to the next step


@dataclass
class AppState:
    index: int
    spec: ApplicationSpec
    pid: int  # settable: the driver emulator puts its child process's pid here
    tag: str | None  # None: the pid is the tag
    cores: tuple[int, ...]  # logical
    models: list[ModelSpec]
    model_ids: list[tuple[str, int]]  # (uuid, model_id) per model
    runs: list[ModelRun] = field(default_factory=list)
    running: bool = False
    cpu_user_s: float = 0.0
    cpu_system_s: float = 0.0
    executions: int = 0
    cpu_user_per_step: float = 0.0  # CPU seconds per step at nominal load
    cpu_system_per_step: float = 0.0
    cursor: int = 0  # next core slot in the round-robin over the application's cores
    load: float = 1.0  # slow random walk around 1: the application's current demand
    until_error: int = 0  # executions up to and including the next failing one (0: none fail)
    error_names: tuple[str, ...] = ()
    error_cumulative: tuple[float, ...] = ()  # cumulative weights over error_names
    error_rate: float = 0.0
    model_readings: tuple[ModelReading, ...] | None = None
    latency_seq: int = 0
    latency_total: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW))
    latency_device: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW))

    @property
    def effective_tag(self) -> str:
        return self.tag if self.tag is not None else str(self.pid)

    def host_memory(self) -> dict[str, int]:
        totals = {"application_memory": 0, "constants": 0, "dma_buffers": 0, "tensors": 0}
        for model in self.models:
            for name in totals:
                totals[name] += getattr(model.host_memory, name) * len(self.cores)
        return totals

    def latency_window(self) -> LatencyWindow:
        return LatencyWindow(self.latency_seq, tuple(self.latency_total), tuple(self.latency_device))


def _split(value: int, parts: int) -> list[int]:
    """Split bytes over `parts` cores; the remainder goes to the first so the sum is exact."""
    piece, rest = divmod(value, parts)
    return [piece + rest] + [piece] * (parts - 1)


class Simulation:
    """Read API (for the emulated backend and the driver emulator): `now`, `core_states()`,
    `device_states()`, `applications()`, `models_of(app)`, `physical_cores_of(logical)`.
    The returned objects are the live state: read them, don't change them (except an
    application's `pid`), and expect them to move on the next `advance_to`."""

    def __init__(self, instance: InstanceType, scenario: Scenario, seed: int, start: float) -> None:
        self.instance = instance
        self.scenario = scenario
        self.arch = instance.architecture
        self.lnc = self.arch.default_logical_core_config or 1
        self.rng = random.Random(seed)
        self.start = start
        self.steps = 0
        phys = self.arch.physical_cores_per_device
        self.cores = [CoreState(core=c, device=c // phys) for c in range(phys * instance.device_count)]
        self.devices = [DeviceState(d) for d in range(instance.device_count)]
        # Fixed per-core facts come from their own generator so they don't shift the main stream.
        fixed_rng = random.Random(seed ^ 0x5EED)
        # The second physical core of a logical core does a little less of its work.
        self._skew = [1.0 if c % self.lnc == 0 else fixed_rng.uniform(0.95, 0.99) for c in range(len(self.cores))]
        self._backlog_us = [0.0] * len(self.cores)
        self._demand_us = [0.0] * len(self.cores)
        self._timeout_busy_us = scenario.faults.timeout_busy_s * 1e6
        self.apps: list[AppState] = []
        self._tables: dict[tuple[float, float], tuple[float, ...]] = {}
        for index, (spec, cores) in enumerate(scenario.resolved_applications(instance)):
            self.apps.append(self._new_app(index, spec, cores, scenario.models_for(spec, instance), fixed_rng))
        self._running: list[AppState] = []
        # ECC events: per device and kind, the emulated time of the next one.
        # inf1's driver counts no ECC events (it has no stats/hardware): none happen there.
        scale = 1.0 / 3600.0 if self.arch.has_hardware_stats else 0.0
        self._ecc_rates = [(name, rate * scale) for name, rate in scenario.faults.ecc_per_hour]
        self._ecc_next = [[self._gap(rate) for _, rate in self._ecc_rates] for _ in self.devices]
        self._ecc_soonest = min((t for row in self._ecc_next for t in row), default=math.inf)
        # Fault events (scenario `events`): which are under way, and what they leave behind.
        self._event_active = [False] * len(scenario.events)
        self._storm_carry = [0.0] * len(scenario.events)
        self.absent_devices: set[int] = set()
        self.garbage: dict[tuple[int, int | None, str], str] = {}  # (device, core, file) -> content
        # counter_wrap: what a reader sees is (value + offset) mod 2^64, the offset putting the
        # counter `below` counts short of 2^64 from the start, so it wraps once, continuously.
        self.counter_offsets: dict[tuple[int, str], int] = {
            ((e.device or 0) * phys + (e.core or 0), e.counter or ""): COUNTER_LIMIT - e.below
            for e in scenario.events if e.kind == "counter_wrap"}
        self._update_membership()

    def _new_app(self, index: int, spec: ApplicationSpec, cores: tuple[int, ...], models: list[ModelSpec],
                 fixed_rng: random.Random) -> AppState:
        runs = []
        for i, model in enumerate(models):
            table = self._latency_table(model.latency_ms_median, model.latency_sigma)
            per_step = model.executions_per_second * STEP_S * len(cores) if model.is_running else 0.0
            runs.append(ModelRun(model, uuid.UUID(int=fixed_rng.getrandbits(128)).hex, 10001 + i, table,
                                 per_step, model.device_share, int(model.flops_per_execution / 2)))
        app = AppState(index, spec, FIRST_PID + 7 * index, spec.tag, cores, list(models),
                       [(r.uuid, r.model_id) for r in runs], runs)
        app.cpu_user_per_step = spec.cpu.user / 100.0 * STEP_S
        app.cpu_system_per_step = spec.cpu.system / 100.0 * STEP_S
        self._configure_errors(app, self._base_error_rates(app))
        return app

    def _latency_table(self, median_ms: float, sigma: float) -> tuple[float, ...]:
        """Quantiles of a model's latency; shared by every application running that model
        (churn scenarios create hundreds of applications)."""
        key = (median_ms, sigma)
        table = self._tables.get(key)
        if table is None:
            median_s = median_ms / 1000.0
            table = self._tables[key] = tuple(median_s * math.exp(sigma * z) for z in _STANDARD_NORMAL)
        return table

    def _base_error_rates(self, app: AppState) -> dict[str, float]:
        spec = app.spec
        return dict(spec.error_rates if spec.error_rates is not None else self.scenario.faults.error_rates)

    @staticmethod
    def _configure_errors(app: AppState, rates: dict[str, float]) -> None:
        names = tuple(name for name, rate in rates.items() if rate > 0)
        cumulative: list[float] = []
        for name in names:
            cumulative.append((cumulative[-1] if cumulative else 0.0) + rates[name])
        app.error_names, app.error_cumulative = names, tuple(cumulative)
        app.error_rate = min(1.0, cumulative[-1]) if cumulative else 0.0
        app.until_error = 0  # draw the next failure from the new rates

    # --- read API -------------------------------------------------------------------------

    @property
    def now(self) -> float:
        """The emulated time the state is at (start + whole steps)."""
        return self.start + self.steps * STEP_S

    @property
    def elapsed_s(self) -> float:
        return self.steps * STEP_S

    def core_states(self) -> Sequence[CoreState]:
        """Every physical core, indexed by global physical core index."""
        return self.cores

    def device_states(self) -> Sequence[DeviceState]:
        return self.devices

    def applications(self) -> list[AppState]:
        """The applications running now (started, not stopped), in scenario order."""
        return list(self._running)

    def active_apps(self) -> list[AppState]:
        return list(self._running)

    def physical_cores_of(self, logical: int) -> range:
        return range(logical * self.lnc, (logical + 1) * self.lnc)

    def models_of(self, app: AppState) -> tuple[ModelReading, ...]:
        """What the runtime reports of an application's models: a subgraph per logical core."""
        if app.model_readings is None:  # fixed for the application's life: built once
            app.model_readings = self._model_readings(app)
        return app.model_readings

    def _model_readings(self, app: AppState) -> tuple[ModelReading, ...]:
        per_device = self.arch.physical_cores_per_device // self.lnc
        readings = []
        for run in app.runs:
            host = run.spec.host_memory.model_dump()
            device = run.spec.device_memory.model_dump()
            subgraphs = tuple(
                SubgraphReading(name=f"sg_{i:02d}", core=logical, device=logical // per_device, host=host,
                                device_memory=device)
                for i, logical in enumerate(app.cores)
            )
            readings.append(ModelReading(run.spec.name, run.uuid, run.model_id, run.spec.is_running, subgraphs))
        return tuple(readings)

    # --- time -----------------------------------------------------------------------------

    def advance_to(self, t: float) -> None:
        """Run the whole steps up to emulated time t (a time in the past does nothing)."""
        target = math.floor((t - self.start) / STEP_S + 1e-9)
        while self.steps < target:
            self._step()

    def _gap(self, rate: float) -> float:
        """Time (s) from now to the next event of a Poisson process, as emulated time."""
        if rate <= 0:
            return math.inf
        return self.elapsed_s + self.rng.expovariate(rate)

    def _step(self) -> None:
        self.steps += 1
        self._update_membership()
        rng = self.rng
        for app in self._running:
            # Demand drifts slowly around its nominal level (mean-reverting walk).
            load = app.load + 0.1 * (1.0 - app.load) + 0.08 * (rng.random() - 0.5)
            app.load = 0.6 if load < 0.6 else (1.4 if load > 1.4 else load)
            app.cpu_user_s += app.cpu_user_per_step * app.load
            app.cpu_system_s += app.cpu_system_per_step * app.load
            self._run_app(app)
        self._apply_busy()
        if self.elapsed_s >= self._ecc_soonest:
            self._ecc_events()
        if self._event_active:
            self._apply_events()

    def _run_app(self, app: AppState) -> None:
        rng = self.rng
        ncores = len(app.cores)
        counts: list[int] = []
        total = 0
        for run in app.runs:
            x = run.per_step * app.load + run.carry
            n = int(x)
            run.carry = x - n
            counts.append(n)
            total += n
        if total == 0:
            return
        app.executions += total
        # Per model: a few latency samples stand for all its executions of the step.
        device_us = 0.0
        half_flops = 0  # flop_count grows by 2 x MACs
        mean_device_us = [0.0] * len(counts)
        uniform = rng.random
        for m, n in enumerate(counts):
            if n == 0:
                continue
            run = app.runs[m]
            samples = n if total <= SAMPLES_PER_APP_STEP else max(1, n * SAMPLES_PER_APP_STEP // total)
            # One uniform draw per sample, indexing the quantile table; the device share
            # varies a little from step to step.
            table = run.latency_table
            latencies = [table[int(uniform() * QUANTILES)] for _ in range(samples)]
            share = run.device_share * (1.0 - DEVICE_SHARE_JITTER * uniform())
            app.latency_total.extend(latencies)
            app.latency_device.extend([x * share for x in latencies])
            app.latency_seq += samples
            mean_device_us[m] = mean = sum(latencies) * share / samples * 1e6
            device_us += n * mean
            half_flops += n * run.half_flops
        # The step's executions go round-robin over the cores (the models interleaved), so
        # each core gets its share of the device time and flops.
        base, extra = divmod(total, ncores)
        cursor = app.cursor
        per_core = [base] * ncores
        for e in range(cursor, cursor + extra):
            per_core[e % ncores] += 1
        app.cursor = (cursor + extra) % ncores
        successes = list(per_core)
        extra_us = [0.0] * ncores
        if app.error_rate > 0:
            self._fail_some(app, counts, cursor, successes=successes, extra_us=extra_us,
                            mean_device_us=mean_device_us)
        lnc, skew, demand, cores = self.lnc, self._skew, self._demand_us, self.cores
        per_execution_us = device_us / total
        for j, logical in enumerate(app.cores):
            first = logical * lnc
            cores[first].status["success"] += successes[j]
            work_us = per_core[j] * per_execution_us + extra_us[j]
            flops = 2 * (half_flops * per_core[j] // total // lnc)
            for p in range(first, first + lnc):
                demand[p] += work_us * skew[p]
                cores[p].flops += flops

    def _fail_some(self, app: AppState, counts: list[int], cursor: int, *, successes: list[int],
                   extra_us: list[float], mean_device_us: list[float]) -> None:
        """Turn the executions the failure schedule points at into failures.

        Execution k of the step ran model `m` (models in order, by count) on core slot
        (cursor + k) mod ncores, the round-robin order the step used.
        """
        rng = self.rng
        total = sum(counts)
        ncores = len(app.cores)
        if app.until_error == 0:
            app.until_error = self._executions_to_next_failure(app)
        position = app.until_error - 1
        while position < total:
            j = (cursor + position) % ncores
            model = 0
            reached = counts[0]
            while position >= reached:
                model += 1
                reached += counts[model]
            kind = app.error_names[min(len(app.error_names) - 1, bisect.bisect_right(
                app.error_cumulative, rng.random() * app.error_rate))]
            self.cores[app.cores[j] * self.lnc].status[kind] += 1
            successes[j] -= 1
            if kind == "timeout":  # held the core until the runtime gave up on it
                extra_us[j] += self._timeout_busy_us
            elif kind in ("execute_failed_to_queue", "infer_failed_to_queue"):  # never ran
                extra_us[j] -= mean_device_us[model]
            position += self._executions_to_next_failure(app)
        app.until_error = position - total + 1

    def _executions_to_next_failure(self, app: AppState) -> int:
        """A geometric draw: executions up to and including the next failing one."""
        if app.error_rate >= 1:
            return 1
        u = self.rng.random()
        per_execution = math.log1p(-app.error_rate)
        if per_execution == 0.0:  # a rate too small to tell from 0 in floating point
            return MAX_FAILURE_GAP
        return 1 + int(min(MAX_FAILURE_GAP, math.log1p(-u) / per_execution))

    def _apply_busy(self) -> None:
        backlog, demand = self._backlog_us, self._demand_us
        for p, core in enumerate(self.cores):
            work = backlog[p] + demand[p]
            demand[p] = 0.0
            if work <= 0:
                backlog[p] = 0.0
                continue
            used = STEP_US if work > STEP_US else work
            core.busy_us += int(used)
            left = work - used
            backlog[p] = MAX_BACKLOG_US if left > MAX_BACKLOG_US else left

    def _ecc_events(self) -> None:
        now = self.elapsed_s
        for device, row in zip(self.devices, self._ecc_next, strict=True):
            for k, (name, rate) in enumerate(self._ecc_rates):
                while row[k] <= now:
                    device.ecc[name] += 1
                    row[k] += self.rng.expovariate(rate)
        self._ecc_soonest = min(t for row in self._ecc_next for t in row)

    # --- fault events ------------------------------------------------------------------------

    def _apply_events(self) -> None:
        t = self.elapsed_s + 1e-9
        for i, event in enumerate(self.scenario.events):
            if event.kind == "counter_wrap":
                continue  # an offset from the start (see counter_offsets)
            active = event.at_s <= t < event.end_s
            if event.kind == "ecc_storm" and active:
                self._storm(i, event.device, event.counter or "", event.per_second or 0.0)
            if active == self._event_active[i]:
                continue
            self._event_active[i] = active
            if event.kind == "error_burst":
                for app in self.apps:
                    rates = self._base_error_rates(app)
                    if active:
                        counter = event.counter or ""
                        rates[counter] = rates.get(counter, 0.0) + (event.rate or 0.0)
                    self._configure_errors(app, rates)
            elif event.kind == "driver_reload":
                device = event.device or 0
                if active:
                    self.absent_devices.add(device)
                else:  # back, with every counter the driver keeps starting again from zero
                    self.absent_devices.discard(device)
                    self._reset_device(device)
            elif event.kind == "garbage_file":
                key = (event.device or 0, event.core, event.file or "")
                if active:
                    self.garbage[key] = event.content or ""
                else:
                    self.garbage.pop(key, None)

    def _storm(self, index: int, device: int | None, counter: str, per_second: float) -> None:
        x = per_second * STEP_S + self._storm_carry[index]
        n = int(x)
        self._storm_carry[index] = x - n
        for d in self.devices if device is None else [self.devices[device]]:
            d.ecc[counter] += n

    def seen(self, core: int, counter: str, value: int) -> int:
        """A counter as the driver shows it: u64, wrapping at 2^64 (with any wrap offset)."""
        return (value + self.counter_offsets.get((core, counter), 0)) % COUNTER_LIMIT

    def _reset_device(self, device: int) -> None:
        phys = self.arch.physical_cores_per_device
        for state in self.cores[device * phys:(device + 1) * phys]:
            state.busy_us = state.flops = 0
            state.status = dict.fromkeys(state.status, 0)
            state.model_load_count = 0
        self.devices[device].ecc = dict.fromkeys(self.devices[device].ecc, 0)

    # --- applications starting and stopping -------------------------------------------------

    def _update_membership(self) -> None:
        elapsed = self.steps * STEP_S + 1e-9
        changed = False
        for app in self.apps:
            should = elapsed >= app.spec.start_s and (app.spec.stop_s is None or elapsed < app.spec.stop_s)
            if should != app.running:
                app.running = should
                changed = True
                if should:
                    for logical in app.cores:
                        self.cores[logical * self.lnc].model_load_count += len(app.runs)
                else:  # the process is gone, and its runtime's memory of latencies with it
                    app.latency_total.clear()
                    app.latency_device.clear()
        if changed or self.steps == 0:
            self._running = [app for app in self.apps if app.running]
            self._recompute_memory()

    def _recompute_memory(self) -> None:
        for core in self.cores:
            core.device_memory = dict.fromkeys(DEVICE_MEMORY_CATEGORIES, 0)
            core.device_memory["driver_memory"] = DRIVER_MEMORY_PER_CORE
            core.host_memory = 0
        for device in self.devices:
            device.host_memory = dict.fromkeys(HOST_MEMORY_CATEGORIES, 0)
            device.host_memory.update(DRIVER_HOST_MEMORY_PER_DEVICE)
        phys_per_device = self.arch.physical_cores_per_device
        for app in self._running:
            device_parts = dict(APP_CORE_DEVICE_MEMORY)
            host_parts = {"application_memory": 0, "constants": 0, "dma_buffers": 0, "tensors": 0}
            for model in app.models:
                for name, value in model.device_memory:
                    device_parts[name] = device_parts.get(name, 0) + value
                for name, value in model.host_memory:
                    host_parts[name] += value
            host_total = sum(host_parts.values())
            for logical in app.cores:
                physical = self.physical_cores_of(logical)
                for name, value in device_parts.items():
                    for p, piece in zip(physical, _split(value, self.lnc), strict=True):
                        self.cores[p].device_memory[name] += piece
                for p, piece in zip(physical, _split(host_total, self.lnc), strict=True):
                    self.cores[p].host_memory += piece
                device = self.devices[physical[0] // phys_per_device]
                for name, value in host_parts.items():
                    device.host_memory[name] += value

