"""Reading report lines from stdin for the pipeline front ends, without blocking the loop.

A reader thread reads bounded lines and hands each parsed report to the event loop.  A
malformed line (bad JSON, wrong types, too long, not UTF-8) is logged and skipped; the
front end keeps serving.  End of input ends the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable
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


async def feed_until_done(handle: Callable[[Report], None], stream: BinaryIO) -> int:
    """Give every report on `stream` to `handle` until end of input, SIGTERM or SIGINT.
    Returns how many reports were handled.  Used by both pipeline front ends."""
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    loop.add_signal_handler(signal.SIGINT, done.set)
    count = 0

    async def consume() -> None:
        nonlocal count
        async for report in report_lines(stream):
            handle(report)
            count += 1

    reader = asyncio.create_task(consume())
    waiter = asyncio.create_task(done.wait())
    await asyncio.wait({reader, waiter}, return_when=asyncio.FIRST_COMPLETED)
    reader.cancel()
    waiter.cancel()
    log.info("%s after %d reports", "end of input" if reader.done() and not done.is_set() else "stopped", count)
    return count


def configure_logging(program: str, verbosity: int) -> None:
    levels = {0: logging.CRITICAL + 10, 1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.DEBUG}
    logging.basicConfig(level=levels[verbosity], stream=sys.stderr,
                        format=f"%(asctime)s {program} %(levelname)s: %(message)s")
