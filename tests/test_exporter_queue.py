"""The bounded queue every I/O exporter sits behind: publish never blocks; overflow drops oldest."""

from __future__ import annotations

import asyncio
import io

from exporters.base import ExporterContext, QueuedExporter
from exporters.stdout import StdoutExporter
from neuron_monitor.report import InstanceInfo, Report
from neuron_monitor.selfstats import DaemonStats


class Stalled(QueuedExporter):
    name = "stalled"

    def __init__(self, context: ExporterContext) -> None:
        super().__init__(context, max_queue=4)
        self.release = asyncio.Event()
        self.seen: list[str] = []

    async def handle(self, report: Report) -> None:
        await self.release.wait()
        self.seen.append(report.instance_info.instance_id)


def numbered(i: int) -> Report:
    return Report(instance_info=InstanceInfo(instance_id=str(i)))


async def test_full_queue_drops_oldest_and_counts() -> None:
    context = ExporterContext(DaemonStats(), asyncio.Event())
    exporter = Stalled(context)
    await exporter.start()
    for i in range(20):
        exporter.publish(numbered(i))  # returns at once although nothing is consumed
    await asyncio.sleep(0)
    exporter.release.set()
    await exporter.stop(grace_s=2)
    stats = context.stats.exporters["stalled"]
    # only the newest 4 survive
    assert exporter.seen == ["16", "17", "18", "19"]
    assert stats.dropped_total == 16
    assert stats.published_total == 4


class Failing(QueuedExporter):
    name = "failing"

    async def handle(self, report: Report) -> None:
        raise ConnectionError("endpoint down")


async def test_handler_failures_are_counted_not_fatal() -> None:
    context = ExporterContext(DaemonStats(), asyncio.Event())
    exporter = Failing(context)
    await exporter.start()
    for i in range(3):
        exporter.publish(numbered(i))
    await exporter.stop(grace_s=2)
    stats = context.stats.exporters["failing"]
    assert stats.failures_total == 3
    assert stats.last_error == "endpoint down"


async def test_stdout_writes_one_line_per_report() -> None:
    buffer = io.BytesIO()
    context = ExporterContext(DaemonStats(), asyncio.Event())
    exporter = StdoutExporter(context, stream=buffer)
    await exporter.start()
    exporter.publish(numbered(1))
    exporter.publish(numbered(2))
    await exporter.stop(grace_s=2)
    lines = buffer.getvalue().splitlines()
    assert [Report.model_validate_json(line).instance_info.instance_id for line in lines] == ["1", "2"]


class BrokenStream(io.BytesIO):
    def write(self, data: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        raise ValueError("no fd")  # like a stream with no descriptor: the exporter must cope


async def test_stdout_reader_gone_requests_stop() -> None:
    context = ExporterContext(DaemonStats(), asyncio.Event())
    exporter = StdoutExporter(context, stream=BrokenStream())
    await exporter.start()
    exporter.publish(numbered(1))
    await asyncio.wait_for(context.stop_requested.wait(), 2)
    await exporter.stop(grace_s=1)
