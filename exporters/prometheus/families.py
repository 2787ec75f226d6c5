"""A minimal metric-family model and its two text renderings (Prometheus 0.0.4 and OpenMetrics).

We render text ourselves rather than through prometheus_client objects: the whole
exposition is rebuilt once per report and then served as bytes, so a scrape costs a
dictionary lookup, and label strings are escaped once per series.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

CONTENT_TYPE_TEXT = "text/plain; version=0.0.4; charset=utf-8"
CONTENT_TYPE_OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def labels(pairs: Iterable[tuple[str, str]]) -> str:
    """Pre-rendered label set: `a="x",b="y"` (without braces)."""
    return _labels(tuple(pairs))


@functools.lru_cache(maxsize=8192)  # a trn2.48xlarge report has ~1,500 label sets
def _labels(pairs: tuple[tuple[str, str], ...]) -> str:
    # The same label sets come back in every report: render each once.
    return ",".join(f'{k}="{escape_label(v)}"' for k, v in pairs)


def format_value(value: float) -> str:
    if isinstance(value, int) or (value.is_integer() and abs(value) < 1e15):
        return str(int(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


@dataclass(slots=True)
class Family:
    name: str  # without _total / _info
    kind: str  # "gauge", "counter" or "info"
    help: str
    samples: dict[str, float] = field(default_factory=dict)  # rendered labels -> value

    def set(self, label_str: str, value: float) -> None:
        self.samples[label_str] = value

    def add(self, label_str: str, value: float) -> None:
        self.samples[label_str] = self.samples.get(label_str, 0) + value

    @property
    def sample_name(self) -> str:
        if self.kind == "counter":
            return self.name + "_total"
        if self.kind == "info":
            return self.name + "_info"
        return self.name


def _help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def render_text(families: Iterable[Family]) -> str:
    """Prometheus text format 0.0.4."""
    out: list[str] = []
    for fam in families:
        if not fam.samples:
            continue
        name = fam.sample_name
        out.append(f"# HELP {name} {_help(fam.help)}\n# TYPE {name} {'gauge' if fam.kind == 'info' else fam.kind}\n")
        out.extend(f"{name}{{{lab}}} {format_value(v)}\n" if lab else f"{name} {format_value(v)}\n"
                   for lab, v in fam.samples.items())
    return "".join(out)


def render_openmetrics(families: Iterable[Family], terminate: bool = True) -> str:
    """OpenMetrics 1.0 text; `terminate=False` leaves off `# EOF` so more can follow."""
    out: list[str] = []
    for fam in families:
        if not fam.samples:
            continue
        name = fam.sample_name
        out.append(f"# HELP {fam.name} {_help(fam.help)}\n# TYPE {fam.name} {fam.kind}\n")
        out.extend(f"{name}{{{lab}}} {format_value(v)}\n" if lab else f"{name} {format_value(v)}\n"
                   for lab, v in fam.samples.items())
    if terminate:
        out.append("# EOF\n")
    return "".join(out)
