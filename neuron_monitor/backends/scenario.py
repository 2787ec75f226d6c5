"""Emulation scenarios: which applications run, what load they put on the cores, and how
often things go wrong.  Validated like the config: unknown keys and bad values are
rejected with their JSON path.

A scenario that leaves out `applications` gets the default ones for the instance type
(one application per device, using all of that device's logical cores), running the
scenario's default models for the instance family.  So one file (configs/scenarios/
default.json) serves every instance type; `resolved_applications()` checks a scenario
against one instance type (cores that exist, no core used twice at once, models that
fit in the cores' memory).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from neuron_monitor.catalogue import INSTANCE_TYPES, InstanceType, instance_type
from neuron_monitor.execution_mapping import STATUS_COUNTERS
from neuron_monitor.jsonpath import json_path

MIB = 1024**2
GIB = 1024**3
# Device memory the runtime itself takes on every logical core an application uses,
# beside its models' (driver category names).
APP_CORE_DEVICE_MEMORY: dict[str, int] = {
    "runtime_memory": 64 * MIB,
    "model_shared_scratchpad": 128 * MIB,
    "nonshared_scratchpad": 16 * MIB,
    "collectives": 32 * MIB,
    "notifications": 2 * MIB,
    "dma_rings": 4 * MIB,
    "uncategorized": 1 * MIB,
}
# What the driver keeps on every physical core / device whether or not anything runs.
DRIVER_MEMORY_PER_CORE = 4 * MIB
DRIVER_HOST_MEMORY_PER_DEVICE: dict[str, int] = {
    "driver_memory": 2 * MIB,
    "notifications": 256 * 1024,
    "dma_rings": 1 * MIB,
    "uncategorized": 64 * 1024,
}
MAX_CORE_RANGE = 4096
ERROR_COUNTERS: tuple[str, ...] = tuple(c for c in STATUS_COUNTERS if c != "success")
Family = Literal["inf1", "inf2", "trn1", "trn2"]


class ScenarioError(Exception):
    """A scenario that cannot be used; str() is one line naming the field and the reason."""


def parse_core_list(text: str) -> tuple[int, ...]:
    """Parse a NEURON_RT_VISIBLE_CORES value: "0-3", "4,5", "0-1,6" -> sorted unique indices."""
    cores: set[int] = set()
    stripped = text.strip()
    if not stripped:
        raise ValueError("empty core list")
    for part in stripped.split(","):
        piece = part.strip()
        first, sep, last = piece.partition("-")
        try:
            low = int(first)
            high = int(last) if sep else low
        except ValueError:
            raise ValueError(f"invalid core range {piece!r} (expected N or N-M)") from None
        if low < 0 or high < low:
            raise ValueError(f"invalid core range {piece!r}")
        if high - low >= MAX_CORE_RANGE:
            raise ValueError(f"core range {piece!r} is too large")
        cores.update(range(low, high + 1))
    return tuple(sorted(cores))


def format_core_list(cores: tuple[int, ...]) -> str:
    """The inverse of parse_core_list, with ranges collapsed ("0-3,6")."""
    parts: list[str] = []
    run: list[int] = []
    for core in sorted(set(cores)):
        if run and core == run[-1] + 1:
            run.append(core)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [core]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(parts)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeviceMemory(_Strict):
    """Device memory a model takes on each logical core it is loaded on, in bytes."""

    constants: int = Field(default=512 * MIB, ge=0)
    model_code: int = Field(default=64 * MIB, ge=0)
    runtime_memory: int = Field(default=16 * MIB, ge=0)
    tensors: int = Field(default=256 * MIB, ge=0)

    def total(self) -> int:
        return self.constants + self.model_code + self.runtime_memory + self.tensors


class HostMemory(_Strict):
    """Host memory a model takes for each logical core it is loaded on, in bytes."""

    application_memory: int = Field(default=256 * MIB, ge=0)
    constants: int = Field(default=0, ge=0)
    dma_buffers: int = Field(default=8 * MIB, ge=0)
    tensors: int = Field(default=32 * MIB, ge=0)


class ModelSpec(_Strict):
    """A model loaded on every logical core of its application (one subgraph per core)."""

    name: str = Field(min_length=1, max_length=128)
    executions_per_second: float = Field(default=50.0, ge=0, le=100_000)  # per logical core
    latency_ms_median: float = Field(default=8.0, gt=0, le=600_000)  # total latency, log-normal
    latency_sigma: float = Field(default=0.25, ge=0, le=3)  # of the log-normal distribution
    device_share: float = Field(default=0.85, gt=0, le=1)  # device time / total latency
    flops_per_execution: float = Field(default=2.0e11, ge=0)  # per execution on one logical core
    is_running: bool = True  # loaded but idle when false
    device_memory: DeviceMemory = Field(default_factory=DeviceMemory)
    host_memory: HostMemory = Field(default_factory=HostMemory)


class CpuUse(_Strict):
    """CPU the application's process uses, in percent of one vCPU."""

    user: float = Field(default=60.0, ge=0, le=6400)
    system: float = Field(default=8.0, ge=0, le=6400)


def _check_error_rates(value: dict[str, float]) -> dict[str, float]:
    for name, rate in value.items():
        if name not in ERROR_COUNTERS:
            raise ValueError(f"unknown error counter {name!r}; valid: {', '.join(ERROR_COUNTERS)}")
        if not 0 <= rate <= 1:
            raise ValueError(f"rate of {name!r} must be between 0 and 1, got {rate}")
    if sum(value.values()) > 1:
        raise ValueError("error rates add up to more than 1")
    return value


class ApplicationSpec(_Strict):
    tag: str | None = Field(default=None, max_length=255)  # None: the pid is the tag
    # Logical cores: a NEURON_RT_VISIBLE_CORES string ("0-3", "4,5"), or how many (the lowest
    # cores no application names explicitly), or `device` for all cores of one device.
    cores: str | int | None = None
    device: int | None = Field(default=None, ge=0)
    cpu: CpuUse = Field(default_factory=CpuUse)
    start_s: float = Field(default=0.0, ge=0)
    stop_s: float | None = Field(default=None, gt=0)
    models: list[ModelSpec] | None = None  # None: the scenario's default models for the family
    error_rates: dict[str, float] | None = None  # None: the scenario's faults.error_rates

    @field_validator("cores")
    @classmethod
    def _cores(cls, value: str | int | None) -> str | int | None:
        if isinstance(value, str):
            parse_core_list(value)
        elif isinstance(value, int) and value < 1:
            raise ValueError("a core count must be at least 1")
        return value

    @field_validator("error_rates")
    @classmethod
    def _rates(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        return None if value is None else _check_error_rates(value)

    @model_validator(mode="after")
    def _one_placement(self) -> ApplicationSpec:
        if self.cores is not None and self.device is not None:
            raise ValueError('give either "cores" or "device", not both')
        if self.stop_s is not None and self.stop_s <= self.start_s:
            raise ValueError("stop_s must be after start_s")
        return self

    def overlaps_in_time(self, other: ApplicationSpec) -> bool:
        end = self.stop_s if self.stop_s is not None else float("inf")
        other_end = other.stop_s if other.stop_s is not None else float("inf")
        return self.start_s < other_end and other.start_s < end


class EccRates(_Strict):
    """ECC events per device per hour (a Poisson process each)."""

    mem_ecc_corrected: float = Field(default=30.0, ge=0)
    mem_ecc_uncorrected: float = Field(default=12.0, ge=0)
    sram_ecc_corrected: float = Field(default=20.0, ge=0)
    sram_ecc_uncorrected: float = Field(default=12.0, ge=0)
    mem_ecc_repairable_uncorrected: float = Field(default=12.0, ge=0)


def _default_error_rates() -> dict[str, float]:
    # Small, but every counter moves within minutes at the default load (a few hundred
    # executions per second per application).
    common = {
        "execute_completed_with_num_error": 2e-4,
        "execute_completed_with_error": 1e-4,
        "execute_failed_to_queue": 1e-4,
        "timeout": 5e-5,
        "exec_bad_input": 5e-5,
    }
    return {name: common.get(name, 3e-5) for name in ERROR_COUNTERS}


class Faults(_Strict):
    # Probability per execution of each failing outcome (driver status counter names).
    error_rates: dict[str, float] = Field(default_factory=_default_error_rates)
    ecc_per_hour: EccRates = Field(default_factory=EccRates)
    # How long a timed-out execution keeps its core busy before the runtime gives up.
    timeout_busy_s: float = Field(default=0.5, ge=0, le=3600)

    @field_validator("error_rates")
    @classmethod
    def _rates(cls, value: dict[str, float]) -> dict[str, float]:
        return _check_error_rates(value)


def _model(name: str, load: tuple[float, float, float, float, float],
           device: tuple[int, int, int, int], host: tuple[int, int, int, int]) -> ModelSpec:
    """load: executions/s, median latency ms, sigma, device share, flops per execution."""
    eps, median_ms, sigma, share, flops = load
    return ModelSpec(
        name=name, executions_per_second=eps, latency_ms_median=median_ms, latency_sigma=sigma,
        device_share=share, flops_per_execution=flops,
        device_memory=DeviceMemory(constants=device[0], model_code=device[1], runtime_memory=device[2],
                                   tensors=device[3]),
        host_memory=HostMemory(application_memory=host[0], constants=host[1], dma_buffers=host[2], tensors=host[3]),
    )


def _default_models() -> dict[Family, list[ModelSpec]]:
    """Per family, models whose load keeps each logical core ~55 % busy (~100 executions/s on trn).

    Sizes are per logical core: LLM weights are sharded over the application's cores.
    """
    return {
        "trn2": [
            _model("llama-3.1-8b-decode", (36, 11.0, 0.2, 0.88, 3.2e10),
                   (4 * GIB, 256 * MIB, 64 * MIB, 6 * GIB), (512 * MIB, 64 * MIB, 32 * MIB, 64 * MIB)),
            _model("llama-3.1-8b-prefill", (4, 45.0, 0.25, 0.92, 4.1e12),
                   (4 * GIB, 320 * MIB, 64 * MIB, 2 * GIB), (128 * MIB, 64 * MIB, 32 * MIB, 256 * MIB)),
            _model("bge-large-embedding", (60, 1.0, 0.3, 0.8, 2.2e10),
                   (160 * MIB, 48 * MIB, 16 * MIB, 96 * MIB), (64 * MIB, 0, 8 * MIB, 16 * MIB)),
        ],
        "trn1": [
            _model("llama-3.2-3b-decode", (30, 14.0, 0.2, 0.88, 2.4e10),
                   (3 * GIB, 192 * MIB, 64 * MIB, 4 * GIB), (384 * MIB, 48 * MIB, 32 * MIB, 64 * MIB)),
            _model("llama-3.2-3b-prefill", (3, 50.0, 0.25, 0.92, 1.5e12),
                   (3 * GIB, 256 * MIB, 64 * MIB, 1 * GIB), (128 * MIB, 48 * MIB, 32 * MIB, 192 * MIB)),
            _model("bge-large-embedding", (40, 1.5, 0.3, 0.8, 4.4e10),
                   (320 * MIB, 48 * MIB, 16 * MIB, 96 * MIB), (64 * MIB, 0, 8 * MIB, 16 * MIB)),
        ],
        "inf2": [
            _model("bert-large", (80, 4.0, 0.25, 0.75, 2.9e11),
                   (680 * MIB, 64 * MIB, 16 * MIB, 256 * MIB), (192 * MIB, 0, 16 * MIB, 32 * MIB)),
            _model("resnet-50", (150, 1.5, 0.3, 0.8, 8.2e9),
                   (100 * MIB, 24 * MIB, 8 * MIB, 64 * MIB), (96 * MIB, 0, 8 * MIB, 16 * MIB)),
            _model("llama-3.2-1b-decode", (10, 15.0, 0.2, 0.88, 2.5e9),
                   (2400 * MIB, 128 * MIB, 32 * MIB, 2 * GIB), (256 * MIB, 32 * MIB, 16 * MIB, 32 * MIB)),
        ],
        "inf1": [
            _model("bert-base", (60, 5.0, 0.25, 0.75, 2.2e10),
                   (220 * MIB, 32 * MIB, 8 * MIB, 96 * MIB), (128 * MIB, 0, 8 * MIB, 16 * MIB)),
            _model("resnet-50", (100, 2.5, 0.3, 0.8, 8.2e9),
                   (100 * MIB, 24 * MIB, 8 * MIB, 64 * MIB), (96 * MIB, 0, 8 * MIB, 16 * MIB)),
            _model("yolov5s", (30, 4.0, 0.3, 0.8, 1.6e10),
                   (28 * MIB, 16 * MIB, 8 * MIB, 48 * MIB), (64 * MIB, 0, 8 * MIB, 16 * MIB)),
        ],
    }


ECC_COUNTERS = ("mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_corrected", "sram_ecc_uncorrected",
                "mem_ecc_repairable_uncorrected")
EventKind = Literal["error_burst", "ecc_storm", "driver_reload", "counter_wrap", "garbage_file"]
_CORE_COUNTER_FILES = ("nc_time_in_use", "flop_count")


class FaultEvent(_Strict):
    """Something going wrong at a given emulated time (seconds from the start).

    - `error_burst`: for `duration_s`, every application's executions fail as `counter`
      (a driver status counter) with probability `rate`, on top of the usual rates.
    - `ecc_storm`: for `duration_s`, `per_second` ECC events of kind `counter` on `device`
      (every device when absent).
    - `driver_reload`: `device` disappears for `duration_s` and comes back with every
      counter reset to zero.
    - `counter_wrap`: the `counter` (`nc_time_in_use`, `flop_count` or a status counter) of
      physical core `core` of `device` starts `below` counts short of 2^64, so it wraps once
      it has counted that much (`at_s` is not used).
    - `garbage_file`: for `duration_s` the file `file` (relative to the core's folder when
      `core` is given, else to the device's) holds `content` instead of a counter.
    """

    kind: EventKind
    at_s: float = Field(ge=0)
    duration_s: float = Field(default=0.0, ge=0)
    device: int | None = Field(default=None, ge=0)
    core: int | None = Field(default=None, ge=0)
    counter: str | None = None
    rate: float | None = Field(default=None, ge=0, le=1)
    per_second: float | None = Field(default=None, ge=0, le=100_000)
    file: str | None = Field(default=None, min_length=1, max_length=200)
    content: str | None = Field(default=None, max_length=4096)
    below: int = Field(default=1000, gt=0, lt=1 << 62)

    @model_validator(mode="after")
    def _fields_for_kind(self) -> FaultEvent:
        need: dict[str, tuple[str, ...]] = {
            "error_burst": ("counter", "rate", "duration_s"),
            "ecc_storm": ("counter", "per_second", "duration_s"),
            "driver_reload": ("device", "duration_s"),
            "counter_wrap": ("device", "core", "counter"),
            "garbage_file": ("device", "file", "content", "duration_s"),
        }
        for name in need[self.kind]:
            value = getattr(self, name)
            if value is None or (name == "duration_s" and value <= 0):
                raise ValueError(f'"{self.kind}" needs "{name}"')
        if self.kind == "error_burst" and (self.counter == "success" or self.counter not in STATUS_COUNTERS):
            raise ValueError(f"unknown error counter {self.counter!r}")
        if self.kind == "ecc_storm" and self.counter not in ECC_COUNTERS:
            raise ValueError(f"unknown ECC counter {self.counter!r}; valid: {', '.join(ECC_COUNTERS)}")
        if self.kind == "counter_wrap" and self.counter not in (*_CORE_COUNTER_FILES, *STATUS_COUNTERS):
            raise ValueError(f"cannot wrap {self.counter!r}: use nc_time_in_use, flop_count or a status counter")
        if self.file is not None and (self.file.startswith("/") or ".." in self.file.split("/")):
            raise ValueError("file must be a relative path inside the device or core folder")
        return self

    @property
    def end_s(self) -> float:
        return self.at_s + self.duration_s


class Churn(_Strict):
    """Short-lived applications starting and exiting all the time, on one core each."""

    applications_per_minute: float = Field(gt=0, le=600)
    # at least a millisecond: a shorter life vanishes when added to a start time (stop == start)
    lifetime_s: float = Field(ge=0.001, le=3600)
    start_s: float = Field(default=0.0, ge=0)
    duration_s: float = Field(default=600.0, gt=0, le=86400)  # how long churn goes on (bounds the list)


class Scenario(_Strict):
    applications: list[ApplicationSpec] | None = None  # None: one application per device
    events: list[FaultEvent] = Field(default_factory=list)
    churn: Churn | None = None
    # Models of applications that name none, per instance family; a family left out keeps
    # the built-in models.
    default_models: dict[Family, list[ModelSpec]] = Field(default_factory=_default_models)
    faults: Faults = Field(default_factory=Faults)

    @field_validator("default_models")
    @classmethod
    def _complete_families(cls, value: dict[Family, list[ModelSpec]]) -> dict[Family, list[ModelSpec]]:
        built_in = _default_models()
        return {family: value.get(family, built_in[family]) for family in built_in}

    def models_for(self, app: ApplicationSpec, instance: InstanceType) -> list[ModelSpec]:
        if app.models is not None:
            return list(app.models)
        family: Family = instance.family  # type: ignore[assignment]  # the catalogue's families
        return list(self.default_models[family])

    def resolved_applications(self, instance: InstanceType) -> list[tuple[ApplicationSpec, tuple[int, ...]]]:
        """Each application with the logical cores it uses, checked against the instance type."""
        arch = instance.architecture
        per_device = arch.physical_cores_per_device // (arch.default_logical_core_config or 1)
        total = per_device * instance.device_count
        apps = self.applications
        if apps is None:
            apps = [] if self.churn is not None else default_applications(instance)
        if self.churn is not None:
            apps = [*apps, *self._churn_applications(instance, total)]
        for index, event in enumerate(self.events):
            if event.device is not None and event.device >= instance.device_count:
                raise ScenarioError(f"events[{index}].device: {instance.name} has devices "
                                    f"0-{instance.device_count - 1}")
            if event.core is not None and event.core >= arch.physical_cores_per_device:
                raise ScenarioError(f"events[{index}].core: devices of {instance.name} have physical cores "
                                    f"0-{arch.physical_cores_per_device - 1}")
        explicit: set[int] = set()
        for index, app in enumerate(apps):
            if isinstance(app.cores, str):
                explicit.update(_explicit_cores(index, app, instance, total))
        next_free = 0
        out: list[tuple[ApplicationSpec, tuple[int, ...]]] = []
        for index, app in enumerate(apps):
            if app.device is not None:
                if app.device >= instance.device_count:
                    raise ScenarioError(
                        f"applications[{index}].device: {instance.name} has devices 0-{instance.device_count - 1}"
                    )
                cores = tuple(range(app.device * per_device, (app.device + 1) * per_device))
            elif isinstance(app.cores, str):
                cores = _explicit_cores(index, app, instance, total)
            elif isinstance(app.cores, int):
                # Counted cores: the lowest ones no application names explicitly, in list order.
                picked: list[int] = []
                while len(picked) < app.cores and next_free < total:
                    if next_free not in explicit:
                        picked.append(next_free)
                    next_free += 1
                if len(picked) < app.cores:
                    raise ScenarioError(
                        f"applications[{index}].cores: {app.cores} cores asked for, but only {len(picked)} of "
                        f"{instance.name}'s {total} logical cores are left"
                    )
                cores = tuple(picked)
            else:
                cores = tuple(range(total))
            out.append((app, cores))
        _check_no_sharing(out)
        self._check_memory(out, instance)
        return out

    def _churn_applications(self, instance: InstanceType, total: int) -> list[ApplicationSpec]:
        """One application every 60/rate seconds, each on its own logical core while it lives;
        cores are reused round-robin, so lifetimes must fit in the rotation."""
        churn = self.churn
        assert churn is not None  # noqa: S101 - called only with churn
        used = {c for app in self.applications or () if isinstance(app.cores, str) for c in parse_core_list(app.cores)}
        free = [c for c in range(total) if c not in used]
        interval = 60.0 / churn.applications_per_minute
        if not free or churn.lifetime_s >= len(free) * interval:
            raise ScenarioError(
                f"churn: {churn.applications_per_minute:g} applications a minute living {churn.lifetime_s:g}s "
                f"need more than the {len(free)} free logical cores of {instance.name}"
            )
        count = int(churn.duration_s / interval)
        return [ApplicationSpec(tag=f"churn-{k}", cores=str(free[k % len(free)]),
                                start_s=churn.start_s + k * interval,
                                stop_s=churn.start_s + k * interval + churn.lifetime_s,
                                cpu=CpuUse(user=5.0, system=1.0)) for k in range(count)]

    def _check_memory(self, apps: list[tuple[ApplicationSpec, tuple[int, ...]]], instance: InstanceType) -> None:
        arch = instance.architecture
        lnc = arch.default_logical_core_config or 1
        per_core = arch.device_memory_size // (arch.physical_cores_per_device // lnc)
        capacity = per_core - DRIVER_MEMORY_PER_CORE * lnc
        for index, (app, _) in enumerate(apps):
            need = sum(APP_CORE_DEVICE_MEMORY.values())
            need += sum(m.device_memory.total() for m in self.models_for(app, instance))
            if need > capacity:
                where = (f"applications[{index}].models" if app.models is not None
                         else f"default_models.{instance.family}")
                raise ScenarioError(
                    f"{where}: the models need {need / GIB:.2f} GiB of device memory per logical core, "
                    f"{instance.name} has {capacity / GIB:.2f} GiB"
                )


def _explicit_cores(index: int, app: ApplicationSpec, instance: InstanceType, total: int) -> tuple[int, ...]:
    cores = parse_core_list(str(app.cores))
    if cores[-1] >= total:
        raise ScenarioError(
            f"applications[{index}].cores: core {cores[-1]} does not exist on {instance.name} "
            f"(logical cores 0-{total - 1})"
        )
    return cores


def _check_no_sharing(apps: list[tuple[ApplicationSpec, tuple[int, ...]]]) -> None:
    """The runtime gives a core to one process at a time: two applications running at the
    same time may not share one."""
    for i, (app, cores) in enumerate(apps):
        for j in range(i):
            other, other_cores = apps[j]
            shared = set(cores) & set(other_cores)
            if shared and app.overlaps_in_time(other):
                raise ScenarioError(
                    f"applications[{i}].cores: core {min(shared)} is also used by applications[{j}] "
                    f"while both run"
                )


def default_applications(instance: InstanceType) -> list[ApplicationSpec]:
    """One application per device, on all of its logical cores."""
    return [
        ApplicationSpec(tag=f"{instance.family}-app-{d}", device=d, cpu=CpuUse(user=60.0, system=8.0))
        for d in range(instance.device_count)
    ]


def default_scenario(instance: InstanceType | str) -> Scenario:
    """The built-in scenario with its applications spelled out for one instance type."""
    resolved = instance_type(instance) if isinstance(instance, str) else instance
    return Scenario(applications=default_applications(resolved))


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        message = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown key"
        # A union (str | int) adds the member type to the location; the user never wrote it.
        loc = tuple(p for p in err["loc"] if p not in ("str", "int"))
        raise ScenarioError(f"{source}: {json_path(loc)}: {message}") from None


def load_scenario(path: str | Path) -> Scenario:
    source = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(f"{source}: cannot read scenario file: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScenarioError(f"{source}: not valid JSON: {exc}") from None
    return parse_scenario(data, source)


def validate_for_all_instance_types(scenario: Scenario) -> dict[str, str]:
    """Instance type -> the error the scenario has there (empty when it fits everywhere)."""
    problems: dict[str, str] = {}
    for name, inst in INSTANCE_TYPES.items():
        try:
            scenario.resolved_applications(inst)
        except ScenarioError as exc:
            problems[name] = str(exc)
    return problems

