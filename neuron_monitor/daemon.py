"""The daemon's lifecycle in one place: start exporters, run the scheduler, shut down.

Signals only set flags (SIGTERM/SIGINT: stop; SIGHUP: reload the config at the next
cycle).  Shutdown is bounded: the current cycle gets a moment to finish, then exporters
get what is left of a two-second budget to flush.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from exporters.base import Exporter, ExporterContext
from neuron_monitor.backends.base import DeviceBackend
from neuron_monitor.config import ConfigError, MonitorConfig, load_config
from neuron_monitor.report import InstanceInfo, Report
from neuron_monitor.scheduler import Scheduler
from neuron_monitor.selfstats import DaemonStats

log = logging.getLogger(__name__)

SHUTDOWN_BUDGET_S = 2.0
CYCLE_GRACE_S = 0.7
# Each cycle allocates thousands of short-lived objects, nearly all freed by reference
# counting; with the default gen0 threshold (700) the cyclic collector ran ~3 times a cycle
# and now and then walked every object left from start-up (~50,000: pydantic, aiohttp),
# ~0.8 ms a cycle and 20 ms spikes (benchmarks/bench_sysfs.py).  Start-up objects are frozen
# out of collections and gen0 collects after 10,000 net allocations: cyclic garbage is still
# collected, just less often.
GC_THRESHOLDS = (10_000, 10, 10)


def settle_gc() -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class StartupError(Exception):
    """Something the daemon needs could not start (e.g. a port in use)."""


@dataclass
class DaemonOptions:
    once: bool = False
    config_path: str | None = None


ExporterFactory = Callable[[ExporterContext], Sequence[Exporter]]


class Daemon:
    def __init__(
        self,
        backend: DeviceBackend,
        config: MonitorConfig,
        build_exporters: ExporterFactory,
        identity: Callable[[], Awaitable[InstanceInfo]],
        options: DaemonOptions,
    ) -> None:
        self.backend = backend
        self.config = config
        self.options = options
        self.stats = DaemonStats()
        self.stop_requested = asyncio.Event()
        self._build_exporters = build_exporters
        self._identity = identity
        self._exporters: list[Exporter] = []
        self.scheduler: Scheduler | None = None

    def _prepare(self, report: Report) -> None:
        """In the collection thread: exporters encode or render ahead of publishing."""
        for exporter in self._exporters:
            try:
                exporter.prepare(report)
            except Exception:  # publish() still gets the report, and does the work itself
                log.exception("%s exporter failed to prepare a report", exporter.name)

    def _publish(self, report: Report) -> None:
        for exporter in self._exporters:
            try:
                exporter.publish(report)
            except Exception:  # one exporter's bug must not starve the others
                log.exception("%s exporter rejected a report", exporter.name)

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.stop_requested.set)
        loop.add_signal_handler(signal.SIGINT, self.stop_requested.set)
        loop.add_signal_handler(signal.SIGHUP, self.request_reload)

    def request_reload(self) -> None:
        path = self.options.config_path
        if path is None or self.scheduler is None:
            log.warning("SIGHUP: no config file was given; nothing to reload")
            return
        try:
            config = load_config(path)
        except ConfigError as exc:
            log.error("SIGHUP: config not reloaded, keeping the previous one: %s", exc)
            return
        self.scheduler.reload(config)
        log.warning("SIGHUP: config %s reloaded; it takes effect at the next cycle", path)

    async def run(self) -> int:
        self._install_signals()
        context = ExporterContext(stats=self.stats, stop_requested=self.stop_requested)
        self._exporters = list(self._build_exporters(context))
        started: list[Exporter] = []
        try:
            for exporter in self._exporters:
                await exporter.start()
                started.append(exporter)
        except Exception as exc:
            self._exporters = started
            await self._stop_exporters(time.monotonic() + SHUTDOWN_BUDGET_S)
            raise StartupError(f"{exporter.name} exporter could not start: {exc}") from exc
        instance_info = await self._identity()
        if instance_info.error:
            log.info("instance_info: %s", instance_info.error)
        self.scheduler = Scheduler(self.backend, self.config, self._publish, self.stats, instance_info,
                                   prepare=self._prepare)
        settle_gc()  # everything start-up made stays; what cycles make is short-lived
        collect = asyncio.create_task(self.scheduler.run(self.stop_requested, once=self.options.once))
        stop_wait = asyncio.create_task(self.stop_requested.wait())
        try:
            await asyncio.wait({collect, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
            if not collect.done():
                # Let the cycle in progress finish if it can; abandon it otherwise.
                done, _ = await asyncio.wait({collect}, timeout=CYCLE_GRACE_S)
                if not done:
                    collect.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await collect
        finally:
            stop_wait.cancel()
            await self._stop_exporters(time.monotonic() + SHUTDOWN_BUDGET_S - CYCLE_GRACE_S)
            self.backend.close()
        log.info("stopped after %d reports", self.stats.reports_total)
        return 0

    async def _stop_exporters(self, deadline: float) -> None:
        async def stop_one(exporter: Exporter) -> None:
            try:
                await exporter.stop(max(0.05, deadline - time.monotonic()))
            except Exception:
                log.exception("%s exporter did not stop cleanly", exporter.name)

        await asyncio.gather(*(stop_one(e) for e in self._exporters))
