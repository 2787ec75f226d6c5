"""A deterministic simulation of Neuron devices and the applications running on them.

Time advances in fixed steps from the start time and every random draw comes from one
seeded generator in a fixed order, so the state at time t is the same however often (or
rarely) it is looked at.  The state is kept the way the driver keeps it: cumulative
per-core counters (busy time, flops, status outcomes), per-device ECC counters, memory
by category; plus what only the runtime knows (latencies, loaded models, CPU use).

Counts agree by construction: every execution an application runs increments exactly one
status counter on one of its cores, its device time goes into that core's busy time
(capped at the step length), and device latency is a share of total latency.
"""

from __future__ import annotations

import math
import random
import uuid
from collections import deque
from dataclasses import dataclass, field

from neuron_monitor.backends.base import (
    DEVICE_MEMORY_CATEGORIES,
    HOST_MEMORY_CATEGORIES,
    LatencyWindow,
    ModelReading,
    SubgraphReading,
)
from neuron_monitor.backends.scenario import ApplicationSpec, ModelSpec, Scenario
from neuron_monitor.catalogue import InstanceType
from neuron_monitor.execution_mapping import STATUS_COUNTERS

STEP_S = 0.1
LATENCY_WINDOW = 4096
SAMPLES_PER_STEP = 8  # latency samples drawn per model per step, whatever the execution count (cost bound)
RUNTIME_MEMORY_PER_CORE = 64 * 1024**2
SCRATCHPAD_PER_CORE = 128 * 1024**2
DRIVER_MEMORY_PER_CORE = 4 * 1024**2
DRIVER_HOST_MEMORY_PER_DEVICE = 2 * 1024**2


def poisson(rng: random.Random, lam: float) -> int:
    """A Poisson draw: exact for small means, normal approximation for large ones."""
    if lam <= 0:
        return 0
    if lam > 30:
        return max(0, round(rng.gauss(lam, math.sqrt(lam))))
    threshold = math.exp(-lam)
    k, p = 0, rng.random()
    while p > threshold:
        k += 1
        p *= rng.random()
    return k


@dataclass
class CoreState:
    """One physical core's cumulative counters and current memory."""

    core: int
    device: int
    busy_us: int = 0
    flops: int = 0
    status: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATUS_COUNTERS, 0))
    device_memory: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DEVICE_MEMORY_CATEGORIES, 0))
    host_memory: int = 0


@dataclass
class DeviceState:
    device: int
    ecc: dict[str, int] = field(default_factory=lambda: {
        "mem_ecc_corrected": 0, "mem_ecc_uncorrected": 0, "sram_ecc_corrected": 0,
        "sram_ecc_uncorrected": 0, "mem_ecc_repairable_uncorrected": 0})
    host_memory: dict[str, int] = field(default_factory=lambda: dict.fromkeys(HOST_MEMORY_CATEGORIES, 0))


@dataclass
class AppState:
    index: int
    spec: ApplicationSpec
    pid: int
    tag: str | None  # None: the pid is the tag
    cores: tuple[int, ...]  # logical
    models: list[ModelSpec]
    model_ids: list[tuple[str, int]]  # (uuid, model_id) per model
    running: bool = False
    cpu_user_s: float = 0.0
    cpu_system_s: float = 0.0
    executions: int = 0
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


class Simulation:
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
        id_rng = random.Random(seed ^ 0x5EED)
        self.apps: list[AppState] = []
        for index, (spec, cores) in enumerate(scenario.resolved_applications(instance)):
            models = spec.models if spec.models is not None else scenario.default_models
            ids = [(uuid.UUID(int=id_rng.getrandbits(128)).hex, 10001 + i) for i in range(len(models))]
            self.apps.append(AppState(index, spec, 10_000 + 7 * index, spec.tag, cores, list(models), ids))
        self._error_names = list(scenario.faults.error_rates)
        self._error_weights = list(scenario.faults.error_rates.values())
        self._error_rate = sum(self._error_weights)
        self._step_busy = [0] * len(self.cores)
        self._update_membership()

    @property
    def now(self) -> float:
        return self.start + self.steps * STEP_S

    def physical_cores_of(self, logical: int) -> range:
        return range(logical * self.lnc, (logical + 1) * self.lnc)

    def advance_to(self, t: float) -> None:
        target = math.floor((t - self.start) / STEP_S + 1e-9)
        while self.steps < target:
            self._step()

    def active_apps(self) -> list[AppState]:
        return [app for app in self.apps if app.running]

    # --- one step ---------------------------------------------------------------------

    def _step(self) -> None:
        self.steps += 1
        self._update_membership()
        step_us = STEP_S * 1e6
        self._step_busy = [0] * len(self.cores)
        for app in self.apps:
            if not app.running:
                continue
            app.cpu_user_s += app.spec.cpu.user / 100.0 * STEP_S
            app.cpu_system_s += app.spec.cpu.system / 100.0 * STEP_S
            for model in app.models:
                if model.is_running:
                    self._run_model(app, model, step_us)
        for device in self.devices:
            for name, per_hour in self.scenario.faults.ecc_per_hour:
                device.ecc[name] += poisson(self.rng, per_hour / 3600.0 * STEP_S)

    def _run_model(self, app: AppState, model: ModelSpec, step_us: float) -> None:
        rng = self.rng
        median_s = model.latency_ms_median / 1000.0
        mean_device_s = median_s * math.exp(model.latency_sigma**2 / 2) * model.device_share
        ran = 0
        for logical in app.cores:
            n = poisson(rng, model.executions_per_second * STEP_S)
            if n == 0:
                continue
            ran += n
            failed = poisson(rng, n * self._error_rate) if self._error_rate else 0
            failed = min(failed, n)
            physical = self.physical_cores_of(logical)
            share = 1.0 / len(physical)
            for p in physical:
                core = self.cores[p]
                # The logical core's device time is spread over its physical cores, unevenly on purpose.
                skew = 1.0 + rng.uniform(-0.05, 0.05) if len(physical) > 1 else 1.0
                wanted = int(n * mean_device_s * 1e6 * skew)
                busy = min(wanted, int(step_us) - self._step_busy[p])  # a core is busy at most 100 %
                self._step_busy[p] += busy
                core.busy_us += busy
                core.flops += int(n * model.flops_per_execution * share)
            # Each execution's outcome is counted once, on the first physical core of the logical core.
            counters = self.cores[physical[0]].status
            counters["success"] += n - failed
            for _ in range(failed):
                counters[rng.choices(self._error_names, self._error_weights)[0]] += 1
        if ran:
            app.executions += ran
            samples = min(ran, SAMPLES_PER_STEP)
            for _ in range(samples):
                total = median_s * math.exp(rng.gauss(0.0, model.latency_sigma))
                app.latency_total.append(total)
                app.latency_device.append(total * model.device_share)
            app.latency_seq += samples

    # --- applications starting and stopping ---------------------------------------------

    def _update_membership(self) -> None:
        elapsed = self.steps * STEP_S + 1e-9
        changed = False
        for app in self.apps:
            should = elapsed >= app.spec.start_s and (app.spec.stop_s is None or elapsed < app.spec.stop_s)
            if should != app.running:
                app.running = should
                changed = True
        if changed or self.steps == 0:
            self._recompute_memory()

    def _recompute_memory(self) -> None:
        for core in self.cores:
            core.device_memory = dict.fromkeys(DEVICE_MEMORY_CATEGORIES, 0)
            core.host_memory = 0
        for device in self.devices:
            device.host_memory = dict.fromkeys(HOST_MEMORY_CATEGORIES, 0)
            device.host_memory["driver_memory"] = DRIVER_HOST_MEMORY_PER_DEVICE
        for core in self.cores:
            core.device_memory["driver_memory"] = DRIVER_MEMORY_PER_CORE
        for app in self.active_apps():
            for logical in app.cores:
                physical = list(self.physical_cores_of(logical))
                parts = {"runtime_memory": RUNTIME_MEMORY_PER_CORE, "model_shared_scratchpad": SCRATCHPAD_PER_CORE}
                for model in app.models:
                    for name in ("constants", "model_code", "runtime_memory", "tensors"):
                        parts[name] = parts.get(name, 0) + getattr(model.device_memory, name)
                for name, value in parts.items():
                    for i, p in enumerate(physical):  # split evenly, remainder on the first core
                        piece = value // len(physical) + (value % len(physical) if i == 0 else 0)
                        self.cores[p].device_memory[name] += piece
            device_host = app.host_memory()
            devices = sorted({logical * self.lnc // self.arch.physical_cores_per_device for logical in app.cores})
            for name, value in device_host.items():
                for i, d in enumerate(devices):
                    piece = value // len(devices) + (value % len(devices) if i == 0 else 0)
                    self.devices[d].host_memory[name] += piece

    # --- what the runtime would tell about an application ---------------------------------

    def models_of(self, app: AppState) -> tuple[ModelReading, ...]:
        per_device = self.arch.physical_cores_per_device // self.lnc
        readings = []
        for model, (model_uuid, model_id) in zip(app.models, app.model_ids, strict=True):
            host = model.host_memory.model_dump()
            device = model.device_memory.model_dump()
            subgraphs = tuple(
                SubgraphReading(name=f"sg_{i:02d}", core=logical, device=logical // per_device, host=host,
                                device_memory=device)
                for i, logical in enumerate(app.cores)
            )
            readings.append(ModelReading(model.name, model_uuid, model_id, model.is_running, subgraphs))
        return tuple(readings)
