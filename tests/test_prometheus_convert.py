"""Report -> exposition: the original names and labels, counter semantics, promtool's verdict."""

from __future__ import annotations

import gzip
import re
import subprocess

import pytest

from exporters.prometheus.convert import INSTANCE_LABELS, ReportConverter
from exporters.prometheus.exposition import Exposition
from exporters.prometheus.families import render_openmetrics, render_text
from neuron_monitor.report import Report
from neuron_monitor.selfstats import DaemonStats
from tests.prometheus_reports import emulated_reports
from tests.prometheus_server import PROMTOOL

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, line
        name, labs, value = match.groups()
        out.setdefault(name, []).append((dict(LABEL.findall(labs or "")), float(value)))
    return out


@pytest.fixture(scope="module")
def reports() -> list[Report]:
    return emulated_reports("trn2.48xlarge", count=4)


def test_original_names_and_labels(reports: list[Report]) -> None:
    conv = ReportConverter()
    series = parse(render_text(conv.convert(reports[-1])))
    for name in ["neuroncore_utilization_ratio", "neuron_runtime_vcpu_usage_ratio", "neuron_runtime_memory_used_bytes",
                 *[f"neuroncore_memory_usage_{k}" for k in ("constants", "model_code", "model_shared_scratchpad",
                                                            "runtime_memory", "tensors")],
                 "execution_errors_total", "execution_status_total", "execution_latency_seconds",
                 "hardware_ecc_events_total", "system_vcpu_count", "system_vcpu_usage_ratio",
                 "system_memory_total_bytes", "system_memory_used_bytes", "system_swap_total_bytes",
                 "system_swap_used_bytes", "instance_info", "neuron_hardware_info",
                 # what the original lacked
                 "neuroncore_flops", "neuron_execution_device_latency_seconds", "neuron_device_memory_used_bytes",
                 "neuron_runtime_loaded_models", "neuron_device_ecc_repairable_uncorrected_total",
                 "neuron_monitor_group_errors"]:
        assert name in series, name
        for labels, _ in series[name]:
            assert set(INSTANCE_LABELS) <= set(labels), (name, labels)
    util = series["neuroncore_utilization_ratio"]
    assert len(util) == 64  # 16 devices x 4 logical cores
    assert all(0 <= v <= 1 for _, v in util)
    assert {lab["neuron_device"] for lab, _ in util} == {str(d) for d in range(16)}
    assert all(int(lab["neuroncore"]) // 4 == int(lab["neuron_device"]) for lab, _ in util)
    mem = series["neuroncore_memory_usage_constants"]
    assert all(lab["memory_location"] == "None" for lab, _ in mem)
    assert {lab["usage_type"] for lab, _ in series["system_vcpu_usage_ratio"]} == {"user", "system"}
    assert {lab["event_type"] for lab, _ in series["hardware_ecc_events_total"]} == {
        "mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_corrected", "sram_ecc_uncorrected"}
    assert {lab["percentile"] for lab, _ in series["execution_latency_seconds"]} == {
        "p0", "p1", "p25", "p50", "p75", "p99", "p100"}
    hw = series["neuron_hardware_info"][0][0]
    assert (hw["neuron_device_count"], hw["neuroncore_per_device_count"]) == ("16", "4")
    report = reports[-1]
    entry = report.neuron_runtime_data[0]
    assert entry.report.neuroncore_counters is not None
    want = entry.report.neuroncore_counters.neuroncores_in_use["0"].neuroncore_utilization / 100
    got = [v for lab, v in util if lab["runtime_tag"] == entry.neuron_runtime_tag and lab["neuroncore"] == "0"]
    assert got == [pytest.approx(want)]


def test_counters_add_each_new_collection_once(reports: list[Report]) -> None:
    conv = ReportConverter()
    totals = []
    for report in (reports[1], reports[1], reports[2], reports[3]):  # the repeated report must not count twice
        series = parse(render_text(conv.convert(report)))
        totals.append(sum(v for lab, v in series["execution_status_total"] if lab["status_type"] == "completed"))
    per_report = [sum(e.report.execution_stats.execution_summary.completed
                      for e in r.neuron_runtime_data if e.report.execution_stats) for r in reports[1:]]
    assert totals[0] == per_report[0]
    assert totals[1] == totals[0]
    assert totals[2] == per_report[0] + per_report[1]
    assert totals[3] == sum(per_report)


def test_unscraped_reports_still_count_and_a_report_renders_once(reports: list[Report]) -> None:
    """Reports are accounted on arrival and rendered on the first scrape only: counters
    over reports nobody scraped are exact, and many scrapes of one report render it once."""
    expo = Exposition(DaemonStats())
    for report in (reports[1], reports[2], reports[3]):
        expo.update(report)  # nobody scrapes these
    assert expo.renders == 0
    bodies = [expo.body(openmetrics=om, compress=gz)[0] for om in (False, True) for gz in (False, True)] * 3
    assert len(bodies) == 12 and expo.renders == 1
    text = expo.body(openmetrics=False, compress=False)[0].decode()
    completed = sum(v for lab, v in parse(text)["execution_status_total"] if lab["status_type"] == "completed")
    assert completed == sum(e.report.execution_stats.execution_summary.completed
                            for r in reports[1:] for e in r.neuron_runtime_data if e.report.execution_stats)
    expo.update(reports[3])  # a new report: rendered afresh on the next scrape
    expo.body(openmetrics=False, compress=False)
    assert expo.renders == 2


def test_served_bodies_are_kept_until_the_next_report_or_a_second(reports: list[Report]) -> None:
    stats = DaemonStats()
    expo = Exposition(stats)
    expo.update(reports[1])
    first, _ = expo.body(openmetrics=False, compress=False, now=100.0)
    stats.reports_total = 41  # the daemon's own counters move ...
    assert expo.body(openmetrics=False, compress=False, now=100.5)[0] is first  # ... a lookup within the TTL
    later = expo.body(openmetrics=False, compress=False, now=101.1)[0].decode()
    assert re.search(r"^neuron_monitor_reports_total\{[^}]*\} 41$", later, re.M)  # sampled again after it
    expo.update(reports[2])  # a new report is served at once, whatever the TTL
    assert expo.body(openmetrics=False, compress=False, now=101.2)[0].decode() != later


def test_gone_applications_and_failed_groups_disappear(reports: list[Report]) -> None:
    conv = ReportConverter()
    conv.convert(reports[1])
    report = reports[2].model_copy(deep=True)
    gone = report.neuron_runtime_data.pop(0)
    broken = report.neuron_runtime_data[0]
    assert broken.report.execution_stats is not None and broken.report.neuroncore_counters is not None
    broken.report.execution_stats.error = "counters unreadable"
    broken.report.neuroncore_counters.error = "counters unreadable"
    series = parse(render_text(conv.convert(report)))
    tags = {lab["runtime_tag"] for lab, _ in series["execution_status_total"]}
    assert gone.neuron_runtime_tag not in tags
    assert broken.neuron_runtime_tag not in tags
    assert broken.neuron_runtime_tag not in {lab["runtime_tag"] for lab, _ in series["neuroncore_utilization_ratio"]}
    errors = {lab["group"]: v for lab, v in series["neuron_monitor_group_errors"]}
    assert errors["execution_stats"] == 1 and errors["neuroncore_counters"] == 1 and errors["memory_used"] == 0


def test_same_tag_twice_gives_valid_exposition(reports: list[Report]) -> None:
    report = reports[2].model_copy(deep=True)
    for entry in report.neuron_runtime_data:
        entry.neuron_runtime_tag = "same"
    text = render_text(ReportConverter().convert(report))
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    keys = [line.rsplit(" ", 1)[0] for line in lines]
    assert len(keys) == len(set(keys))  # no duplicate series


def test_label_values_are_escaped() -> None:
    report = emulated_reports("inf2.xlarge", count=2)[-1]
    report.neuron_runtime_data[0].neuron_runtime_tag = 'we"ird\\tag\nx'
    text = render_text(ReportConverter().convert(report))
    assert 'runtime_tag="we\\"ird\\\\tag\\nx"' in text


# The one lint remark promtool makes, on a name the original exporter used and dashboards depend on.
KNOWN_LINT = b'system_vcpu_count non-histogram and non-summary metrics should not have "_count" suffix'


def exposition_of(reports: list[Report]) -> Exposition:
    stats = DaemonStats()
    stats.group("memory_info").collections_total = 3
    stats.exporter("stdout").dropped_total = 2
    stats.last_report_monotonic = 0.0
    expo = Exposition(stats)
    for report in reports:
        expo.update(report)
    return expo


def test_promtool_accepts_the_text_exposition(reports: list[Report]) -> None:
    body, ctype = exposition_of(reports).body(openmetrics=False, compress=False)
    assert ctype.startswith("text/plain; version=0.0.4")
    result = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True, check=False)
    problems = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert problems == [KNOWN_LINT], problems  # syntax errors or any other lint would show here
    assert result.returncode == 3  # promtool's status for lint remarks only (1 would be a parse error)


def test_openmetrics_exposition_parses(reports: list[Report]) -> None:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    body, ctype = exposition_of(reports).body(openmetrics=True, compress=False)
    assert ctype.startswith("application/openmetrics-text; version=1.0.0")
    assert body.endswith(b"# EOF\n") and body.count(b"# EOF") == 1
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    assert families["execution_errors"].type == "counter"
    assert families["instance"].type == "info"
    assert families["neuron_monitor_exporter_dropped"].samples[0].value == 2


def test_openmetrics_types(reports: list[Report]) -> None:
    text = render_openmetrics(ReportConverter().convert(reports[-1]))
    assert "# TYPE execution_errors counter" in text
    assert "# TYPE instance info" in text
    assert "instance_info{" in text


def report_series(body: bytes) -> dict[str, list[tuple[dict[str, str], float]]]:
    """A body's series from the report (the daemon's own self-metrics vary between calls)."""
    text = (gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body).decode()
    return {name: samples for name, samples in parse(text.replace("# EOF\n", "")).items()
            if not name.startswith(("neuron_monitor_", "process_"))}


@pytest.fixture(scope="module")
def eight_reports() -> list[Report]:
    return emulated_reports("trn2.48xlarge", count=8)


@pytest.mark.parametrize(("openmetrics", "compress"), [(False, False), (False, True), (True, False), (True, True)])
def test_reports_are_rendered_ahead_only_while_scrapes_keep_up(eight_reports: list[Report], openmetrics: bool,
                                                                compress: bool) -> None:
    """prepare() (the collection thread) renders a report ahead once two reports in a row were
    served, in the format they were served in; what is served equals the lazy rendering, and
    it stops rendering ahead as soon as a report goes unscraped."""
    ahead, lazy = Exposition(DaemonStats()), Exposition(DaemonStats())
    for n, report in enumerate(eight_reports[:5]):
        ahead.prepare(report)
        ahead.update(report)
        lazy.update(report)
        before = ahead.renders
        served = ahead.body(openmetrics, compress)[0]
        assert ahead.renders == before + (0 if n >= 2 else 1)  # from the third on, nothing left to render
        assert report_series(served) == report_series(lazy.body(openmetrics, compress)[0])
    assert ahead.rendered_ahead == 3  # reports 2, 3, 4
    for report in eight_reports[5:7]:  # nobody scrapes these
        ahead.prepare(report)
        ahead.update(report)
        lazy.update(report)
    assert ahead.rendered_ahead == 4  # one more (scrapes had kept up so far), then no more
    ahead.prepare(eight_reports[7])
    ahead.update(eight_reports[7])
    lazy.update(eight_reports[7])
    assert ahead.rendered_ahead == 4
    final = report_series(ahead.body(openmetrics, compress)[0])
    assert final == report_series(lazy.body(openmetrics, compress)[0])  # counters exact over unscraped reports
    assert sum(v for lab, v in final["execution_status_total"] if lab["status_type"] == "completed") == sum(
        e.report.execution_stats.execution_summary.completed
        for r in eight_reports for e in r.neuron_runtime_data if e.report.execution_stats)


def test_a_failed_render_ahead_counts_the_report_once(eight_reports: list[Report],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    ahead, lazy = Exposition(DaemonStats()), Exposition(DaemonStats())
    for report in eight_reports[:2]:
        for expo in (ahead, lazy):
            expo.update(report)
            expo.body(False, False)

    def broken(report: Report) -> list[object]:
        raise RuntimeError("render bug")

    with monkeypatch.context() as patch:
        patch.setattr(ahead._converter, "families", broken)
        with pytest.raises(RuntimeError):
            ahead.prepare(eight_reports[2])  # accounted, then failed to render
    ahead.update(eight_reports[2])  # must not account it again
    lazy.update(eight_reports[2])
    assert ahead.rendered_ahead == 0
    assert report_series(ahead.body(False, False)[0]) == report_series(lazy.body(False, False)[0])
