"""The configuration file: the original JSON format, validated strictly, resolved into periods.

A bad config must stop the daemon before it starts, with one line that names the field
(as a JSON path such as `neuron_runtimes[0].metrics[2].type`) and the reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from neuron_monitor.durations import DurationError, parse_duration
from neuron_monitor.jsonpath import json_path
from neuron_monitor.report import RUNTIME_GROUPS, SYSTEM_GROUPS

DEFAULT_PERIOD_S = 5.0

# Group names of old releases that users still have in their configs.
RENAMED_GROUPS: Mapping[str, str] = {
    "nc_counters": "neuroncore_counters",
    "runtime_cpu_usage": "neuron_runtime_vcpu_usage",
    "inference_stats": "execution_stats",
    "hw_counters": "neuron_hw_counters",
}


class ConfigError(Exception):
    """A config that cannot be used; str() is the one line shown to the user."""


def _check_period(value: str | None) -> str | None:
    if value is not None:
        parse_duration(value)  # raises DurationError (a ValueError) with the reason
    return value


def _check_group(value: str, valid: tuple[str, ...], other: tuple[str, ...], where: str) -> str:
    if value in valid:
        return value
    if value in RENAMED_GROUPS:
        new = RENAMED_GROUPS[value]
        if new in valid:
            raise ValueError(f'"{value}" was renamed to "{new}"')
        raise ValueError(f'"{value}" was renamed to "{new}", which belongs in {_where_of(new)}')
    if value in other:
        raise ValueError(f'"{value}" is not a {where} group; it belongs in {_where_of(value)}')
    raise ValueError(f'unknown metric group "{value}"; valid {where} groups: {", ".join(valid)}')


def _where_of(group: str) -> str:
    return '"system_metrics"' if group in SYSTEM_GROUPS else '"neuron_runtimes[].metrics"'


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class RuntimeMetricSpec(_Strict):
    type: str
    period: str | None = None

    _period = field_validator("period")(_check_period)

    @field_validator("type")
    @classmethod
    def _type(cls, value: str) -> str:
        return _check_group(value, RUNTIME_GROUPS, SYSTEM_GROUPS, "runtime")


class SystemMetricSpec(_Strict):
    type: str
    period: str | None = None

    _period = field_validator("period")(_check_period)

    @field_validator("type")
    @classmethod
    def _type(cls, value: str) -> str:
        return _check_group(value, SYSTEM_GROUPS, RUNTIME_GROUPS, "system")


class RuntimeSpec(_Strict):
    tag_filter: str | None = None
    period: str | None = None
    metrics: list[RuntimeMetricSpec] = []

    _period = field_validator("period")(_check_period)

    @field_validator("tag_filter")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {value!r}: {exc}") from None
        return value

    @field_validator("metrics")
    @classmethod
    def _unique(cls, value: list[RuntimeMetricSpec]) -> list[RuntimeMetricSpec]:
        _reject_duplicates([m.type for m in value])
        return value


class ConfigFile(_Strict):
    period: str | None = None
    neuron_runtimes: list[RuntimeSpec] = []
    system_metrics: list[SystemMetricSpec] = []

    _period = field_validator("period")(_check_period)

    @field_validator("system_metrics")
    @classmethod
    def _unique(cls, value: list[SystemMetricSpec]) -> list[SystemMetricSpec]:
        _reject_duplicates([m.type for m in value])
        return value


def _reject_duplicates(types: list[str]) -> None:
    seen: set[str] = set()
    for t in types:
        if t in seen:
            raise ValueError(f'metric group "{t}" is listed twice')
        seen.add(t)


# --- the resolved form the scheduler uses ---------------------------------------------


@dataclass(frozen=True, slots=True)
class RuntimeSelection:
    """One `neuron_runtimes` entry: which applications, which groups at which periods."""

    tag_filter: re.Pattern[str] | None
    groups: Mapping[str, float]

    def matches(self, tag: str) -> bool:
        # The original applies the regex to the whole tag; a search would let ".*x" style
        # filters match more than users expect, so the match is anchored at both ends.
        return self.tag_filter is None or self.tag_filter.fullmatch(tag) is not None


@dataclass(frozen=True, slots=True)
class MonitorConfig:
    runtimes: tuple[RuntimeSelection, ...]
    system_groups: Mapping[str, float]
    source: str = "<defaults>"
    _cache: dict[str, dict[str, float]] = field(default_factory=dict, compare=False, repr=False)

    def groups_for_tag(self, tag: str) -> dict[str, float]:
        """Runtime groups for an application: the union over matching entries.

        A group enabled by several matching entries runs at the shortest of their periods.
        """
        cached = self._cache.get(tag)
        if cached is not None:
            return cached
        result: dict[str, float] = {}
        for selection in self.runtimes:
            if selection.matches(tag):
                for group, period in selection.groups.items():
                    result[group] = min(period, result.get(group, period))
        if len(self._cache) < 10_000:  # bounded: tags are few, but never trust that
            self._cache[tag] = result
        return result

    def all_periods(self) -> list[float]:
        periods = list(self.system_groups.values())
        for selection in self.runtimes:
            periods.extend(selection.groups.values())
        return periods


def default_config(period: float = DEFAULT_PERIOD_S) -> MonitorConfig:
    """No config file: every group, every application, every 5 s."""
    return MonitorConfig(
        runtimes=(RuntimeSelection(None, dict.fromkeys(RUNTIME_GROUPS, period)),),
        system_groups=dict.fromkeys(SYSTEM_GROUPS, period),
    )


def resolve(spec: ConfigFile, source: str = "<config>") -> MonitorConfig:
    root = parse_duration(spec.period) if spec.period else DEFAULT_PERIOD_S
    runtimes = []
    for entry in spec.neuron_runtimes:
        entry_period = parse_duration(entry.period) if entry.period else root
        groups = {m.type: parse_duration(m.period) if m.period else entry_period for m in entry.metrics}
        pattern = re.compile(entry.tag_filter) if entry.tag_filter is not None else None
        runtimes.append(RuntimeSelection(pattern, groups))
    system = {m.type: parse_duration(m.period) if m.period else root for m in spec.system_metrics}
    return MonitorConfig(tuple(runtimes), system, source)




def _describe(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    path = json_path(tuple(err["loc"]))
    kind = err["type"]
    if kind == "extra_forbidden":
        return f"{path}: unknown key"
    if kind == "missing":
        return f"{path}: required field is missing"
    message = str(err["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    if kind.endswith("_type"):
        message = f"{message} (got {json.dumps(err.get('input'))[:60]})"
    return f"{path}: {message}".replace("\n", "\\n")  # always one line


def parse_config(data: Any, source: str = "<config>") -> MonitorConfig:
    """Validate decoded JSON and resolve it; ConfigError names the field and the reason."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the config must be a JSON object")
    try:
        spec = ConfigFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(exc)}") from None
    except DurationError as exc:  # pragma: no cover - pydantic wraps ValueErrors
        raise ConfigError(f"{source}: {exc}") from None
    return resolve(spec, source)


def load_config(path: str | Path) -> MonitorConfig:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read config file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: config file is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise ConfigError(f"{source}: invalid JSON at {where}: {exc.msg}") from None
    return parse_config(data, source)
