"""The daemon's own health as metric families, rendered at scrape time (they change
between reports: the age of the latest report grows while nothing happens)."""

from __future__ import annotations

import asyncio
import os
import time

import psutil

from exporters.prometheus.families import Family
from neuron_monitor import __version__
from neuron_monitor.selfstats import DaemonStats


def self_families(stats: DaemonStats, inst_str: str, now: float | None = None) -> list[Family]:
    now = time.monotonic() if now is None else now
    pre = inst_str + "," if inst_str else ""
    fams = [Family("neuron_monitor_build", "info", "neuron-monitor version")]
    fams[0].set(f'{pre}version="{__version__}"', 1)
    age = stats.report_age_s(now)
    if age is not None:
        fam = Family("neuron_monitor_report_age_seconds", "gauge", "Seconds since the latest report was produced")
        fam.set(inst_str, round(age, 6))
        fams.append(fam)
    reports = Family("neuron_monitor_reports", "counter", "Reports produced")
    reports.set(inst_str, stats.reports_total)
    fams.append(reports)
    duration = Family("neuron_monitor_collection_duration_seconds", "gauge",
                      "Duration of the latest collection of each metric group")
    collections = Family("neuron_monitor_collections", "counter", "Collections of each metric group")
    failures = Family("neuron_monitor_collection_errors", "counter",
                      "Collections of each metric group that reported an error")
    for group, g in sorted(stats.groups.items()):
        lab = f'{pre}group="{group}"'
        duration.set(lab, round(g.last_duration_s, 9))
        collections.set(lab, g.collections_total)
        failures.set(lab, g.errors_total)
    cycle = Family("neuron_monitor_cycle_duration_seconds", "gauge", "Duration of the latest collection cycle")
    cycle.set(inst_str, round(stats.last_cycle_duration_s, 9))
    dropped = Family("neuron_monitor_exporter_dropped", "counter",
                     "Items an exporter dropped because it could not keep up (reports; data points for CloudWatch)")
    exporter_failures = Family("neuron_monitor_exporter_failures", "counter", "Failed deliveries of an exporter")
    for name, e in sorted(stats.exporters.items()):
        lab = f'{pre}exporter="{name}"'
        dropped.set(lab, e.dropped_total)
        exporter_failures.set(lab, e.failures_total)
    fams.extend([duration, collections, failures, cycle, dropped, exporter_failures, *_process_families(inst_str)])
    return fams


_PROCESS = psutil.Process()
# Listing /proc/self/fd costs ~0.4 us a descriptor, and the sysfs backend keeps thousands of
# counter files open: since Linux 6.2 the folder's size is the count; older kernels say 0
# and are counted by listing, at most this often.
FD_LISTING_INTERVAL_S = 30.0
_fd_listing: list[float] = [float("-inf"), 0]


def open_fd_count(now: float | None = None) -> int:
    try:
        size = os.stat("/proc/self/fd").st_size
    except OSError:
        size = 0
    if size > 0:
        return int(size)
    now = time.monotonic() if now is None else now
    if now - _fd_listing[0] >= FD_LISTING_INTERVAL_S:
        _fd_listing[:] = [now, _PROCESS.num_fds()]
    return int(_fd_listing[1])


def _process_families(inst_str: str) -> list[Family]:
    """The daemon's own footprint, for soak tests and alerts: memory, descriptors, tasks."""
    with _PROCESS.oneshot():
        rss = _PROCESS.memory_info().rss
        fds = open_fd_count()
        threads = _PROCESS.num_threads()
        cpu = _PROCESS.cpu_times()
    try:
        tasks = len(asyncio.all_tasks())
    except RuntimeError:  # no running loop (rendering outside the daemon)
        tasks = 0
    out = []
    for name, kind, help_text, value in (
        ("neuron_monitor_resident_memory_bytes", "gauge", "Resident memory of the neuron-monitor process", rss),
        ("neuron_monitor_open_fds", "gauge", "Open file descriptors of the neuron-monitor process", fds),
        ("neuron_monitor_threads", "gauge", "Threads of the neuron-monitor process", threads),
        ("neuron_monitor_asyncio_tasks", "gauge", "asyncio tasks alive in the neuron-monitor process", tasks),
        ("neuron_monitor_cpu_seconds", "counter", "CPU time used by the neuron-monitor process",
         round(cpu.user + cpu.system, 3)),
    ):
        fam = Family(name, kind, help_text)
        fam.set(inst_str, value)
        out.append(fam)
    return out
