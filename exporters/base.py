"""What every exporter implements, and a bounded-queue base for the ones that do I/O.

An exporter must never block collection or the other exporters: `publish()` is called on
the event loop for every finished report and must return at once.  Exporters that do
slow I/O (stdout to a pipe, CloudWatch) inherit `QueuedExporter`: each has its own
bounded queue; when it is full the *oldest* report is dropped and counted.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from dataclasses import dataclass

from neuron_monitor.report import Report
from neuron_monitor.selfstats import DaemonStats

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ExporterContext:
    """What the daemon gives every exporter it builds."""

    stats: DaemonStats
    # Set by an exporter that decides the daemon must end (e.g. stdout closed).
    stop_requested: asyncio.Event


class Exporter(abc.ABC):
    name: str = "exporter"

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Open servers/connections.  Raise a clear exception if it cannot start."""

    def prepare(self, report: Report) -> None:  # noqa: B027 - optional hook
        """Called with each finished report in the collection thread, before `publish()` on
        the event loop: CPU work done here (encoding, rendering) delays no request the event
        loop serves.  Must not block on I/O, and must not touch what the event loop is using."""

    @abc.abstractmethod
    def publish(self, report: Report) -> None:
        """Take a finished report.  Must not block."""

    async def stop(self, grace_s: float) -> None:  # noqa: B027 - optional hook
        """Flush what can be flushed within `grace_s` seconds, then release resources."""


class QueuedExporter(Exporter):
    """An exporter with a bounded queue and one worker task calling `handle()`."""

    def __init__(self, context: ExporterContext, max_queue: int = 64) -> None:
        self.context = context
        self.stats = context.stats.exporter(self.name)
        self._queue: asyncio.Queue[Report] = asyncio.Queue(maxsize=max_queue)
        self._worker: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._worker = asyncio.create_task(self._run(), name=f"exporter-{self.name}")

    def publish(self, report: Report) -> None:
        if self._queue.full():
            with contextlib.suppress(asyncio.QueueEmpty):
                self._queue.get_nowait()
                self._queue.task_done()
            self.stats.dropped_total += 1
            if self.stats.dropped_total == 1 or self.stats.dropped_total % 100 == 0:
                log.warning("%s exporter is behind: %d reports dropped so far",
                            self.name, self.stats.dropped_total)
        self._queue.put_nowait(report)

    @abc.abstractmethod
    async def handle(self, report: Report) -> None:
        """Deliver one report.  Exceptions are logged and counted, never fatal."""

    async def _run(self) -> None:
        while True:
            report = await self._queue.get()
            try:
                await self.handle(report)
                self.stats.published_total += 1
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # an exporter failure must not end the daemon
                self.stats.failures_total += 1
                self.stats.last_error = str(exc)
                log.warning("%s exporter failed: %s", self.name, exc)
            finally:
                self._queue.task_done()

    async def stop(self, grace_s: float) -> None:
        if self._worker is None:
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._queue.join(), grace_s)
        self._worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._worker
        self._worker = None
