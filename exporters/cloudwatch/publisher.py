"""The publisher both ways in share: a bounded buffer, periodic batched sends, retries.

`submit()` never blocks: data points go into a buffer of bounded size (oldest dropped and
counted when full).  Every flush interval the buffer is aggregated and sent, each
PutMetricData call in a worker thread so a slow or dead endpoint never delays the event
loop.  botocore retries each call (standard mode); when a call still fails with
throttling, a 5xx or a network error, the unsent data goes back to the front of the
buffer and the next attempt waits with exponential backoff and jitter.  Data the service
rejects as invalid is dropped (and counted): sending it again would not help.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from exporters.cloudwatch.batching import aggregate, requests
from exporters.cloudwatch.metrics import Datum
from neuron_monitor.selfstats import ExporterStats
from neuron_monitor.threads import in_daemon_thread

log = logging.getLogger(__name__)

BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 60.0


class RetryableError(Exception):
    """Throttling, a 5xx or a network failure: the data is kept for a later attempt."""


class RejectedError(Exception):
    """The service refused the data itself: it is dropped."""


PutFunction = Callable[[list[dict[str, Any]]], None]  # blocking; raises RetryableError / RejectedError


class Publisher:
    def __init__(self, put: PutFunction, stats: ExporterStats, *, flush_interval_s: float = 60.0,
                 max_buffer: int = 100_000, high_resolution: bool = False) -> None:
        self._put = put
        self.stats = stats
        self.flush_interval_s = flush_interval_s
        self.max_buffer = max_buffer  # data points, buffered and awaiting retry together
        self.resolution = 1 if high_resolution else 60
        self._buffer: collections.deque[Datum] = collections.deque()
        # Requests that failed with a retryable error, already aggregated, oldest first.
        self._retry: collections.deque[list[dict[str, Any]]] = collections.deque()
        self._retry_points = 0
        self.requests_sent = 0
        self.datums_sent = 0
        self.datums_dropped = 0
        self._backoff = 0.0
        self._retry_at = 0.0
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    @property
    def buffered(self) -> int:
        """Data points waiting: new ones and those awaiting a retry."""
        return len(self._buffer) + self._retry_points

    def submit(self, datums: list[Datum]) -> None:
        self._buffer.extend(datums)
        self._enforce_bound()

    def _drop(self, points: int, why: str) -> None:
        self.datums_dropped += points
        self.stats.dropped_total += points
        log.warning("CloudWatch: dropped %d data points (%s); %d dropped so far", points, why, self.datums_dropped)

    def _enforce_bound(self) -> None:
        overflow = self.buffered - self.max_buffer
        dropped = 0
        while overflow > 0 and self._retry:  # the oldest data is in the retry queue
            batch = self._retry.popleft()
            points = _points(batch)
            self._retry_points -= points
            overflow -= points
            dropped += points
        while overflow > 0 and self._buffer:
            self._buffer.popleft()
            overflow -= 1
            dropped += 1
        if dropped:
            self._drop(dropped, f"buffer of {self.max_buffer} full, oldest first")

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="cloudwatch-publisher")

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.flush_interval_s)
            self._wake.clear()
            await self.flush()

    async def flush(self, deadline: float | None = None) -> bool:
        """Send what is waiting; False when something is left (failure, backoff or deadline)."""
        if deadline is None and time.monotonic() < self._retry_at:
            return False
        if self._buffer:
            pending = list(self._buffer)
            self._buffer.clear()
            for batch in requests(aggregate(pending, self.resolution)):
                self._retry.append(batch)
                self._retry_points += _points(batch)
        while self._retry:
            batch = self._retry[0]
            timeout = None if deadline is None else max(0.05, deadline - time.monotonic())
            try:
                await asyncio.wait_for(in_daemon_thread(self._put, batch, name="cloudwatch-put"), timeout)
            except RejectedError as exc:
                self._retry.popleft()
                self._retry_points -= _points(batch)
                self.stats.failures_total += 1
                self.stats.last_error = str(exc)
                self._drop(_points(batch), f"rejected by CloudWatch: {exc}")
                continue
            except (RetryableError, TimeoutError) as exc:
                self.stats.failures_total += 1
                self.stats.last_error = str(exc) or "timed out"
                self._backoff = min(BACKOFF_MAX_S, max(BACKOFF_START_S, self._backoff * 2))
                self._retry_at = time.monotonic() + self._backoff * random.uniform(0.5, 1.0)  # noqa: S311
                log.warning("CloudWatch unavailable (%s); %d data points kept, next try in %.1fs",
                            exc or "timed out", self.buffered, self._retry_at - time.monotonic())
                return False
            self._retry.popleft()
            self._retry_points -= _points(batch)
            self.requests_sent += 1
            self.datums_sent += len(batch)
            self.stats.published_total += 1
        self._backoff = 0.0
        self._retry_at = 0.0
        return True

    async def stop(self, grace_s: float) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if not await self.flush(time.monotonic() + grace_s) and self.buffered:
            log.warning("CloudWatch: %d data points not sent at shutdown", self.buffered)


def _points(batch: list[dict[str, Any]]) -> int:
    return int(sum(sum(d["Counts"]) if "Counts" in d else d["StatisticValues"]["SampleCount"] for d in batch))
