"""Reading report lines from stdin for the pipeline front ends, without blocking the loop.

A reader thread reads bounded lines and hands each parsed report to the event loop.  A
malformed line (bad JSON, wrong types, too long, not UTF-8) is logged and skipped; the
front end keeps serving.  End of input ends the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator
from typing import BinaryIO

from pydantic import ValidationError

from neuron_monitor.report import Report

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 32 * 1024 * 1024  # a trn2.48xlarge report is ~100 KB


def parse_report_line(line: bytes) -> Report:
    """Raises ValueError with a one-line reason."""
    try:
        return Report.model_validate_json(line)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"]) or "(root)"
        raise ValueError(f"{where}: {err['msg']}") from None


async def report_lines(stream: BinaryIO, max_line: int = MAX_LINE_BYTES) -> AsyncIterator[Report]:
    """Yield the reports on `stream` until end of input."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Report | None] = asyncio.Queue(maxsize=4)
    stats = {"skipped": 0}

    def put(item: Report | None) -> None:
        asyncio.run_coroutine_threadsafe(queue.put(item), loop).result()

    def reader() -> None:
        number = 0
        try:
            while True:
                line = stream.readline(max_line + 1)
                if not line:
                    break
                number += 1
                if len(line) > max_line and not line.endswith(b"\n"):
                    while line and not line.endswith(b"\n"):  # skip the rest of the long line
                        line = stream.readline(1 << 20)
                    stats["skipped"] += 1
                    log.warning("line %d skipped: longer than %d bytes", number, max_line)
                    continue
                if not line.strip():
                    continue
                try:
                    report = parse_report_line(line)
                except ValueError as exc:
                    stats["skipped"] += 1
                    log.warning("line %d skipped: not a neuron-monitor report: %s", number, exc)
                    continue
                put(report)
        except (OSError, ValueError) as exc:
            log.warning("reading stdin failed: %s", exc)
        except RuntimeError:
            return  # the loop is closing
        with contextlib.suppress(RuntimeError):
            put(None)

    thread = threading.Thread(target=reader, name="stdin-reader", daemon=True)
    thread.start()
    while True:
        item = await queue.get()
        if item is None:
            return
        yield item
