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
import threading
from collections.abc import Callable
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
