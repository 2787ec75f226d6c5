"""What runs in the collection thread: the whole cycle but publishing, with a short GIL
switch interval, and the exporters' prepare() hook ahead of publish()."""

from __future__ import annotations

import asyncio
import io
import json
import sys
import threading

from exporters.base import Exporter, ExporterContext
from exporters.stdout import StdoutExporter
from neuron_monitor.backends.base import AppReading
from neuron_monitor.config import parse_config
from neuron_monitor.daemon import Daemon, DaemonOptions
from neuron_monitor.report import InstanceInfo, Report
from neuron_monitor.selfstats import DaemonStats
from neuron_monitor.threads import COLLECTION_SWITCH_INTERVAL_S, short_switch_interval
from tests.fakes import FakeBackend, core


class Recorder(Exporter):
    name = "recorder"

    def __init__(self, fail_prepare: bool) -> None:
        self.fail_prepare = fail_prepare
        self.prepared: list[tuple[Report, int, float]] = []
        self.published: list[tuple[Report, int]] = []

    def prepare(self, report: Report) -> None:
        self.prepared.append((report, threading.get_ident(), sys.getswitchinterval()))
        if self.fail_prepare:
            raise RuntimeError("prepare bug")

    def publish(self, report: Report) -> None:
        self.published.append((report, threading.get_ident()))


def test_short_switch_interval_is_restored() -> None:
    before = sys.getswitchinterval()
    try:
        with short_switch_interval():
            assert sys.getswitchinterval() == COLLECTION_SWITCH_INTERVAL_S
            raise ValueError("a failing collection")
    except ValueError:
        pass
    assert sys.getswitchinterval() == before


async def test_exporters_prepare_off_the_loop_and_a_failing_prepare_loses_no_report() -> None:
    seen_intervals: list[float] = []
    backend = FakeBackend(apps=[AppReading(1, "a", (0,))], cores={0: core(0)})
    backend.on_snapshot = lambda now: seen_intervals.append(sys.getswitchinterval())
    config = parse_config({"period": "1s", "system_metrics": [{"type": "memory_info"}],
                           "neuron_runtimes": [{"metrics": [{"type": "neuroncore_counters"}]}]})
    broken, good = Recorder(fail_prepare=True), Recorder(fail_prepare=False)

    async def identity() -> InstanceInfo:
        return InstanceInfo()

    before = sys.getswitchinterval()
    daemon = Daemon(backend, config, lambda context: [broken, good], identity, DaemonOptions(once=True))
    assert await daemon.run() == 0
    loop_thread = threading.get_ident()
    assert good.published and len(good.published) == len(broken.published) == len(good.prepared)
    for (prepared, prep_thread, interval), (published, pub_thread) in zip(good.prepared, good.published, strict=True):
        assert prepared is published  # the same report, prepared before it is published
        assert prep_thread != loop_thread and pub_thread == loop_thread
        assert interval == COLLECTION_SWITCH_INTERVAL_S
    assert [r for r, _ in broken.published] == [r for r, _ in good.published]  # its prepare() failing lost nothing
    assert seen_intervals and all(i == COLLECTION_SWITCH_INTERVAL_S for i in seen_intervals)
    assert sys.getswitchinterval() == before


def test_stdout_prepare_encodes_the_report_once() -> None:
    report = Report(instance_info=InstanceInfo(instance_id="i-0123"))
    exporter = StdoutExporter(ExporterContext(stats=DaemonStats(), stop_requested=asyncio.Event()), stream=io.BytesIO())
    exporter.prepare(report)
    line = report.to_json_line()
    assert report.to_json_line() is line  # handle() writes the bytes prepare() made
    assert line.endswith(b"\n") and json.loads(line)["instance_info"]["instance_id"] == "i-0123"
