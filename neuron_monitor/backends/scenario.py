"""Emulation scenarios: which applications run, what load they put on the cores, and how
often things go wrong.  Validated like the config: unknown keys and bad values are
rejected with their JSON path.

A scenario that leaves out `applications` gets the default ones for the instance type:
one application per device, using all of that device's logical cores.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from neuron_monitor.catalogue import InstanceType
from neuron_monitor.execution_mapping import STATUS_COUNTERS
from neuron_monitor.jsonpath import json_path

MIB = 1024**2


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
        if high - low > 4096:
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


class HostMemory(_Strict):
    application_memory: int = Field(default=256 * MIB, ge=0)
    constants: int = Field(default=0, ge=0)
    dma_buffers: int = Field(default=8 * MIB, ge=0)
    tensors: int = Field(default=32 * MIB, ge=0)


class ModelSpec(_Strict):
    name: str = Field(min_length=1, max_length=128)
    executions_per_second: float = Field(default=50.0, ge=0, le=100_000)  # per logical core
    latency_ms_median: float = Field(default=8.0, gt=0, le=600_000)
    latency_sigma: float = Field(default=0.25, ge=0, le=3)  # of the log-normal distribution
    device_share: float = Field(default=0.85, gt=0, le=1)  # device time / total latency
    flops_per_execution: float = Field(default=2.0e11, ge=0)
    is_running: bool = True
    device_memory: DeviceMemory = Field(default_factory=DeviceMemory)
    host_memory: HostMemory = Field(default_factory=HostMemory)


class CpuUse(_Strict):
    """CPU the application's process uses, in percent of one vCPU."""

    user: float = Field(default=60.0, ge=0, le=6400)
    system: float = Field(default=8.0, ge=0, le=6400)


class ApplicationSpec(_Strict):
    tag: str | None = Field(default=None, max_length=255)  # None: the pid is the tag
    cores: str | None = None  # logical cores, NEURON_RT_VISIBLE_CORES syntax
    device: int | None = Field(default=None, ge=0)  # all logical cores of this device
    cpu: CpuUse = Field(default_factory=CpuUse)
    start_s: float = Field(default=0.0, ge=0)
    stop_s: float | None = Field(default=None, gt=0)
    models: list[ModelSpec] | None = None  # None: the scenario's default models

    @field_validator("cores")
    @classmethod
    def _cores(cls, value: str | None) -> str | None:
        if value is not None:
            parse_core_list(value)
        return value

    @model_validator(mode="after")
    def _one_placement(self) -> ApplicationSpec:
        if self.cores is not None and self.device is not None:
            raise ValueError('give either "cores" or "device", not both')
        if self.stop_s is not None and self.stop_s <= self.start_s:
            raise ValueError("stop_s must be after start_s")
        return self


class EccRates(_Strict):
    """ECC events per device per hour."""

    mem_ecc_corrected: float = Field(default=2.0, ge=0)
    mem_ecc_uncorrected: float = Field(default=0.05, ge=0)
    sram_ecc_corrected: float = Field(default=1.0, ge=0)
    sram_ecc_uncorrected: float = Field(default=0.05, ge=0)
    mem_ecc_repairable_uncorrected: float = Field(default=0.05, ge=0)


def _default_error_rates() -> dict[str, float]:
    return {
        "execute_completed_with_num_error": 2e-4,
        "execute_completed_with_error": 1e-4,
        "timeout": 2e-5,
        "exec_bad_input": 5e-5,
        "execute_failed_to_queue": 5e-5,
        "generic_error": 2e-5,
        "hw_error": 1e-5,
    }


class Faults(_Strict):
    # Probability per execution of each failing outcome (driver status counter names).
    error_rates: dict[str, float] = Field(default_factory=_default_error_rates)
    ecc_per_hour: EccRates = Field(default_factory=EccRates)

    @field_validator("error_rates")
    @classmethod
    def _known_counters(cls, value: dict[str, float]) -> dict[str, float]:
        for name, rate in value.items():
            if name == "success" or name not in STATUS_COUNTERS:
                valid = ", ".join(c for c in STATUS_COUNTERS if c != "success")
                raise ValueError(f"unknown error counter {name!r}; valid: {valid}")
            if not 0 <= rate <= 1:
                raise ValueError(f"rate of {name!r} must be between 0 and 1, got {rate}")
        if sum(value.values()) > 1:
            raise ValueError("error rates add up to more than 1")
        return value


def _default_models() -> list[ModelSpec]:
    return [
        ModelSpec(name="llama-shard", executions_per_second=40, latency_ms_median=12.0, latency_sigma=0.2,
                  flops_per_execution=6.0e11),
        ModelSpec(name="bert-base", executions_per_second=60, latency_ms_median=3.0, latency_sigma=0.3,
                  flops_per_execution=4.0e10,
                  device_memory=DeviceMemory(constants=220 * MIB, model_code=30 * MIB, tensors=64 * MIB)),
    ]


class Scenario(_Strict):
    applications: list[ApplicationSpec] | None = None
    default_models: list[ModelSpec] = Field(default_factory=_default_models)
    faults: Faults = Field(default_factory=Faults)
    # Application processes start after this many seconds of emulated time (default: at once).

    def resolved_applications(self, instance: InstanceType) -> list[tuple[ApplicationSpec, tuple[int, ...]]]:
        """Each application with the logical cores it uses; validated against the instance type."""
        arch = instance.architecture
        per_device = arch.physical_cores_per_device // (arch.default_logical_core_config or 1)
        total = per_device * instance.device_count
        apps = self.applications
        if apps is None:
            apps = [ApplicationSpec(tag=f"{arch.family}-app-{d}", device=d) for d in range(instance.device_count)]
        out = []
        for index, app in enumerate(apps):
            if app.device is not None:
                if app.device >= instance.device_count:
                    raise ScenarioError(
                        f"applications[{index}].device: {instance.name} has devices 0-{instance.device_count - 1}"
                    )
                cores = tuple(range(app.device * per_device, (app.device + 1) * per_device))
            elif app.cores is not None:
                cores = parse_core_list(app.cores)
                if cores[-1] >= total:
                    raise ScenarioError(
                        f"applications[{index}].cores: core {cores[-1]} does not exist on {instance.name} "
                        f"(logical cores 0-{total - 1})"
                    )
            else:
                cores = tuple(range(total))
            out.append((app, cores))
        return out




def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        message = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown key"
        raise ScenarioError(f"{source}: {json_path(tuple(err['loc']))}: {message}") from None


def load_scenario(path: str | Path) -> Scenario:
    source = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(f"{source}: cannot read scenario file: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScenarioError(f"{source}: not valid JSON: {exc}") from None
    return parse_scenario(data, source)
