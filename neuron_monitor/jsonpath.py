"""Render a pydantic error location as a JSON path for one-line error messages."""

from __future__ import annotations

import json
import re

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def json_path(loc: tuple[int | str, ...]) -> str:
    """("a", 0, "b") -> "a[0].b"; keys that are not plain names are quoted: `["x y"]`."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif _PLAIN.fullmatch(part):
            path += f".{part}" if path else part
        else:
            path += f"[{json.dumps(part)[:60]}]"
    return path or "(root)"
