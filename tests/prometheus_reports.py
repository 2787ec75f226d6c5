"""Realistic reports for exporter tests, built from the emulated backend through the real
scheduler (so they are exactly what the daemon would publish)."""

from __future__ import annotations

import asyncio
from typing import Any

from neuron_monitor.backends.emulated import EmulatedBackend, emulated_identity
from neuron_monitor.config import default_config
from neuron_monitor.report import Report
from neuron_monitor.scheduler import Scheduler
from neuron_monitor.selfstats import DaemonStats


def emulated_reports(instance: str = "trn2.48xlarge", count: int = 3, seed: int = 1,
                     scenario: Any = None) -> list[Report]:
    class Clock:
        t = 100.0

        def now(self) -> float:
            return self.t

        async def sleep_until(self, deadline: float, wake: asyncio.Event) -> None:
            self.t = max(self.t, deadline)

    clock = Clock()
    backend = EmulatedBackend(instance, seed=seed, scenario=scenario, clock=clock.now)
    reports: list[Report] = []

    async def offload(func: Any, *args: Any) -> Any:
        return func(*args)

    scheduler = Scheduler(backend, default_config(1.0), reports.append, DaemonStats(),
                          emulated_identity(instance, seed), clock=clock, offload=offload)

    async def run() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(scheduler.run(stop))
        while len(reports) < count:
            await asyncio.sleep(0)
        stop.set()
        await task

    asyncio.run(run())
    return reports[:count]
