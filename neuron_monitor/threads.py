"""Blocking calls that must never hold up shutdown.

`asyncio.to_thread` uses the loop's default executor, which `asyncio.run` joins on exit,
and whose threads the interpreter joins at exit: a write to a pipe nobody reads, or an
HTTP call to an endpoint that hangs, would then keep the process alive long after
SIGTERM.  Calls that can block indefinitely run in a daemon thread instead; the awaiting
side can give up (timeout, cancellation) and the process can still exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


async def in_daemon_thread(func: Callable[..., T], *args: object, name: str = "blocking-call") -> T:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():
            return  # the awaiting side gave up
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        try:
            result = func(*args)
        except BaseException as exc:  # handed to the awaiting side, whatever it is
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
                loop.call_soon_threadsafe(settle, None, exc)
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=run, name=name, daemon=True).start()
    return await future


# While the collection thread runs Python, a scrape that arrives on the event loop waits
# for the interpreter until the holder's switch interval runs out (CPython's default is
# 5 ms).  Shortening it only for the duration of a collection bounds that wait to 0.5 ms
# without making the event loop's own work preemptible the rest of the time (a shorter
# interval for the whole process measured worse: benchmarks/bench_scrape.py).
COLLECTION_SWITCH_INTERVAL_S = 0.0005


@contextlib.contextmanager
def short_switch_interval(interval: float = COLLECTION_SWITCH_INTERVAL_S) -> Iterator[None]:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)
