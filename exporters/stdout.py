"""The stdout exporter: one JSON document per line, as the original tool writes them.

Writes happen in a worker thread behind a bounded queue, so a reader that stops reading
(a full pipe) delays only this exporter; reports it cannot keep up with are dropped
(oldest first) and counted.  When the reader goes away (EPIPE) the daemon ends cleanly.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import BinaryIO

from exporters.base import ExporterContext, QueuedExporter
from neuron_monitor.report import Report
from neuron_monitor.threads import in_daemon_thread

log = logging.getLogger(__name__)


class StdoutExporter(QueuedExporter):
    name = "stdout"

    def __init__(self, context: ExporterContext, stream: BinaryIO | None = None, max_queue: int = 16) -> None:
        super().__init__(context, max_queue=max_queue)
        self._stream = stream if stream is not None else sys.stdout.buffer
        self._closed = False

    def prepare(self, report: Report) -> None:
        report.to_json_line()  # encoded here, in the collection thread; handle() reuses it

    async def handle(self, report: Report) -> None:
        if self._closed:
            return
        line = report.to_json_line()
        try:
            await in_daemon_thread(self._write, line, name="stdout-writer")
        except (BrokenPipeError, ConnectionResetError, ValueError):
            self._reader_gone()

    def _write(self, line: bytes) -> None:
        self._stream.write(line)
        self._stream.flush()

    def _reader_gone(self) -> None:
        self._closed = True
        log.info("stdout was closed by its reader; stopping")
        # Point fd 1 at /dev/null so the interpreter's final flush cannot raise again.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
        self.context.stop_requested.set()
