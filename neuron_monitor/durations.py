"""Duration strings as the original config uses them: "500ms", "1s", "2m", "1h", "1m30s"."""

from __future__ import annotations

import re

_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_WHOLE = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h))+")


class DurationError(ValueError):
    pass


def parse_duration(text: str) -> float:
    """Return seconds.  Accepts one or more `<number><unit>` parts (units ms, s, m, h)."""
    if not isinstance(text, str):
        raise DurationError(f"expected a duration string such as \"1s\", got {type(text).__name__}")
    stripped = text.strip()
    if not _WHOLE.fullmatch(stripped):
        raise DurationError(
            f"invalid duration {text!r}: use a number followed by ms, s, m or h (e.g. \"500ms\", \"2s\")"
        )
    seconds = sum(float(num) * _UNIT_SECONDS[unit] for num, unit in _PART.findall(stripped))
    if seconds <= 0:
        raise DurationError(f"duration {text!r} must be greater than zero")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest exact string for `seconds` (used in messages and round-trip tests)."""
    ms = round(seconds * 1000)
    if ms % 3_600_000 == 0:
        return f"{ms // 3_600_000}h"
    if ms % 60_000 == 0:
        return f"{ms // 60_000}m"
    if ms % 1000 == 0:
        return f"{ms // 1000}s"
    return f"{ms}ms"
