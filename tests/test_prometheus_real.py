"""A real Prometheus server scrapes the daemon (in-process endpoint and pipeline form) and its
HTTP API answers with the expected series and values."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from tests.conftest import monitor_command, subprocess_env
from tests.daemon_process import ALL_1S, running_daemon, wait_http
from tests.prometheus_server import PrometheusServer, free_port

# What the default scenario gives each logical core: two models at 40/s x 12 ms and 60/s x 3 ms
# (log-normal, sigma 0.2 and 0.3), 85 % of it on the device -> ~57 % busy, 100 executions/s.
EXECUTIONS_PER_CORE_S = 100.0


def metric_names(prom: PrometheusServer) -> set[str]:
    return set(prom.api("label/__name__/values"))


def test_prometheus_scrapes_the_in_process_endpoint(tmp_path: Path) -> None:
    with running_daemon("--emulate", "trn2.48xlarge", "-c", ALL_1S) as (_, port), \
            PrometheusServer(tmp_path, [f"127.0.0.1:{port}"]) as prom:
        util = prom.wait_for("neuroncore_utilization_ratio", min_results=64)
        values = [float(r["value"][1]) for r in util]
        assert len(values) == 64
        mean = sum(values) / len(values)
        assert 0.45 < mean < 0.70, mean  # the scenario's load (~0.57)
        labels = util[0]["metric"]
        for name in ("instance_name", "instance_id", "instance_type", "availability_zone", "region", "subnet_id",
                     "runtime_tag", "neuroncore", "neuron_device"):
            assert name in labels
        assert labels["instance_type"] == "trn2.48xlarge"
        # counter rates: ~100 executions per second per logical core, 64 cores; once the series
        # are older than the rate window (a younger series gives a partial rate)
        prom.wait_for("count_over_time(execution_status_total[10s]) >= 6", timeout=40)
        rate = prom.wait_for('sum(rate(execution_status_total{status_type="completed"}[4s]))', timeout=40)
        total = float(rate[0]["value"][1])
        assert 0.75 * 64 * EXECUTIONS_PER_CORE_S < total < 1.25 * 64 * EXECUTIONS_PER_CORE_S, total
        assert prom.query("count(execution_latency_seconds)")[0]["value"][1] == str(16 * 7)
        assert prom.query("neuron_hardware_info")[0]["metric"]["neuron_device_count"] == "16"
        assert float(prom.query("system_vcpu_count")[0]["value"][1]) >= 1
        names = metric_names(prom)
        for name in ("neuron_runtime_vcpu_usage_ratio", "neuron_runtime_memory_used_bytes",
                     "neuroncore_memory_usage_tensors", "execution_errors_total", "hardware_ecc_events_total",
                     "system_vcpu_usage_ratio", "system_memory_used_bytes", "instance_info", "neuroncore_flops",
                     "neuron_execution_device_latency_seconds", "neuron_device_memory_used_bytes",
                     "neuron_runtime_loaded_models", "neuron_monitor_collection_duration_seconds",
                     "neuron_monitor_report_age_seconds", "neuron_monitor_exporter_dropped_total"):
            assert name in names, name
        age = float(prom.query("max(neuron_monitor_report_age_seconds)")[0]["value"][1])
        assert age < 3


def test_pipeline_gives_the_same_series(tmp_path: Path) -> None:
    port = free_port()
    daemon = " ".join(shlex.quote(a) for a in monitor_command("--emulate", "trn2.48xlarge", "-c", ALL_1S))
    exporter = f"{shlex.quote(sys.executable)} -m exporters.prometheus.pipeline --port {port} --address 127.0.0.1"
    pipeline = subprocess.Popen(["/bin/sh", "-c", f"exec {daemon} | {exporter}"], env=subprocess_env(),
                                stderr=subprocess.PIPE, start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/ready")
        with PrometheusServer(tmp_path, [f"127.0.0.1:{port}"]) as prom:
            prom.wait_for("neuroncore_utilization_ratio", min_results=64)
            prom.wait_for('sum(rate(execution_status_total{status_type="completed"}[4s]))', timeout=40)
            names = metric_names(prom)
    finally:
        import os
        import signal

        os.killpg(pipeline.pid, signal.SIGTERM)
        pipeline.wait(15)
    report_derived = {"neuroncore_utilization_ratio", "neuroncore_flops", "neuron_runtime_vcpu_usage_ratio",
                      "neuron_runtime_memory_used_bytes", "neuroncore_memory_usage_constants",
                      "execution_errors_total", "execution_status_total", "execution_latency_seconds",
                      "neuron_execution_device_latency_seconds", "hardware_ecc_events_total", "system_vcpu_count",
                      "system_vcpu_usage_ratio", "system_memory_total_bytes", "instance_info",
                      "neuron_hardware_info", "neuron_device_memory_used_bytes", "neuron_monitor_group_errors"}
    assert report_derived <= names, report_derived - names
    assert json.dumps(sorted(names))
