"""CloudWatch: data points, batching, the publisher under faults, against moto in server mode."""

from __future__ import annotations

import asyncio
import itertools
import json
import select
import subprocess
import sys
import time
from typing import Any

import pytest

from exporters.cloudwatch.batching import MAX_VALUES_PER_DATUM, aggregate, estimated_size, requests
from exporters.cloudwatch.client import make_put
from exporters.cloudwatch.metrics import METRICS, Datum, DatumBuilder, Options
from exporters.cloudwatch.publisher import Publisher, RetryableError
from neuron_monitor.report import Report
from neuron_monitor.selfstats import DaemonStats
from tests.cloudwatch_servers import cloudwatch, fault_proxy, metric_sum, moto_server
from tests.conftest import monitor_command, subprocess_env
from tests.daemon_process import ALL_1S
from tests.prometheus_reports import emulated_reports


@pytest.fixture(scope="module")
def reports() -> list[Report]:
    return emulated_reports("trn1.32xlarge", count=4)


def test_instance_metrics_always_finer_ones_opt_in(reports: list[Report]) -> None:
    plain = DatumBuilder(Options()).build(reports[2], 1000.0)
    names = {d.name for d in plain}
    assert {"NeuronCoreUtilization", "Executions", "ExecutionErrors", "ExecutionLatency", "DeviceMemoryUsed",
            "EccEvents", "HostCpuUtilization", "HostMemoryUsed", "ExecutionsPerSecond"} <= names
    assert all(dict(d.dimensions).keys() <= {"InstanceId", "InstanceType", "Status", "ErrorType", "Percentile",
                                             "EventType"} for d in plain if d.name != "ExecutionsPerSecond")
    assert all(d.unit == METRICS[d.name][0] for d in plain)
    full = DatumBuilder(Options(per_application=True, per_core=True, per_device=True)).build(reports[2], 1000.0)
    per_core = [d for d in full if d.name == "NeuronCoreUtilizationPerCore"]
    assert len(per_core) == 32  # trn1.32xlarge: 16 devices x 2 cores
    assert {d.name for d in full} - names == {"NeuronCoreUtilizationPerCore", "RuntimeCpuUtilization",
                                              "DeviceEccEvents", "DeviceMemoryUsedPerDevice"}


def test_counts_are_sent_once_per_collection(reports: list[Report]) -> None:
    builder = DatumBuilder(Options())
    first = builder.build(reports[2], 1.0)
    again = builder.build(reports[2], 2.0)  # the same collections repeated
    completed = sum(e.report.execution_stats.execution_summary.completed
                    for e in reports[2].neuron_runtime_data if e.report.execution_stats)
    assert sum(d.value for d in first if d.name == "Executions" and ("Status", "completed") in d.dimensions) \
        == completed
    assert not [d for d in again if d.name in ("Executions", "ExecutionErrors", "EccEvents")]


def test_aggregation_and_request_limits() -> None:
    dims = (("InstanceId", "i-1"), ("InstanceType", "trn1.32xlarge"))
    same = [Datum("NeuronCoreUtilization", dims, float(v % 5), "Percent", 120.0 + v / 100) for v in range(50)]
    merged = aggregate(same, 60)
    assert len(merged) == 1
    assert sorted(merged[0]["Values"]) == [0.0, 1.0, 2.0, 3.0, 4.0] and sum(merged[0]["Counts"]) == 50
    many = [Datum("X", dims, float(v), "Count", 120.0) for v in range(MAX_VALUES_PER_DATUM + 10)]
    stat = aggregate(many, 60)[0]["StatisticValues"]
    assert stat["SampleCount"] == MAX_VALUES_PER_DATUM + 10 and stat["Maximum"] == MAX_VALUES_PER_DATUM + 9
    lots = aggregate([Datum(f"M{i}", dims, 1.0, "Count", 0.0) for i in range(2500)], 60)
    batches = list(requests(lots))
    assert [len(b) for b in batches] == [1000, 1000, 500]
    big = aggregate([Datum("B", (*dims, ("RuntimeTag", "x" * 250)), float(v), "Count", float(t))
                     for t in range(4000) for v in range(140)], 1)
    for batch in requests(big):
        assert sum(estimated_size(d) for d in batch) <= 800_000


def run_publisher(publisher: Publisher, actions: Any) -> None:
    async def main() -> None:
        await actions(publisher)

    asyncio.run(main())


def test_publisher_bounded_buffer_drops_oldest_and_counts() -> None:
    sent: list[list[dict[str, Any]]] = []
    failing = {"on": True}

    def put(batch: list[dict[str, Any]]) -> None:
        if failing["on"]:
            raise RetryableError("503: down")
        sent.append(batch)

    stats = DaemonStats().exporter("cloudwatch")
    publisher = Publisher(put, stats, max_buffer=100, flush_interval_s=3600)
    dims = (("InstanceId", "i-1"),)

    async def actions(p: Publisher) -> None:
        p.submit([Datum("A", dims, float(i), "Count", 0.0) for i in range(60)])
        assert not await p.flush()
        assert p.buffered == 60
        p.submit([Datum("B", dims, float(i), "Count", 0.0) for i in range(60)])
        assert p.buffered <= 100 and stats.dropped_total == 60  # the whole oldest request (60 points) went
        failing["on"] = False
        p._retry_at = 0.0
        assert await p.flush()

    run_publisher(publisher, actions)
    assert {d["MetricName"] for b in sent for d in b} == {"B"}
    assert stats.failures_total == 1 and publisher.buffered == 0


def read_reports(proc: subprocess.Popen[bytes], count: int, timeout: float = 10) -> list[float]:
    """Times at which `count` report lines arrived on the daemon's stdout."""
    assert proc.stdout is not None
    times = []
    for _ in range(count):
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        assert ready, "stdout stalled"
        assert proc.stdout.readline()
        times.append(time.monotonic())
    return times


def test_daemon_publishes_to_moto_in_few_requests() -> None:
    with moto_server() as moto, fault_proxy(moto) as proxy:
        proc = subprocess.Popen(
            monitor_command("--emulate", "trn1.32xlarge", "-c", ALL_1S, "--cloudwatch-namespace", "NM/Test",
                            "--cloudwatch-region", "us-east-1", "--cloudwatch-endpoint-url", proxy.url,
                            "--cloudwatch-flush-interval", "2s", "--cloudwatch-per-core"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env())
        try:
            lines = read_reports(proc, 7)
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=15)
        assert proc.returncode == 0, err
        stats = proxy.stats()
        # ~7 reports, flushed every 2 s plus a final flush at SIGTERM: a handful of requests
        assert 1 <= stats["put_forwarded"] <= 6, stats
        assert len(lines) == 7
        client = cloudwatch(moto)
        listed = client.list_metrics(Namespace="NM/Test")["Metrics"]
        names = {m["MetricName"] for m in listed}
        assert {"NeuronCoreUtilization", "Executions", "EccEvents", "HostMemoryUsed",
                "NeuronCoreUtilizationPerCore"} <= names
        instance = [{"Name": "InstanceId", "Value": next(
            d["Value"] for m in listed for d in m["Dimensions"] if d["Name"] == "InstanceId")},
                    {"Name": "InstanceType", "Value": "trn1.32xlarge"}]
        completed = metric_sum(client, "NM/Test", "Executions", [*instance, {"Name": "Status", "Value": "completed"}])
        # 16 apps x 2 cores x ~100 executions/s over ~6 s of reports
        assert 6000 < completed < 30000, completed
        util = metric_sum(client, "NM/Test", "NeuronCoreUtilization", instance) / \
            metric_sum(client, "NM/Test", "NeuronCoreUtilization", instance, stat="SampleCount")
        assert 30 < util < 90, util  # the mean over every report's sample
        per_core = {json.dumps(m["Dimensions"], sort_keys=True) for m in listed
                    if m["MetricName"] == "NeuronCoreUtilizationPerCore"}  # moto lists a metric once per put
        assert len(per_core) == 32


def test_faults_are_retried_without_loss() -> None:
    with moto_server() as moto, fault_proxy(moto) as proxy:
        stats = DaemonStats().exporter("cloudwatch")
        put, _ = make_put("NM/Faults", "us-east-1", proxy.url)
        publisher = Publisher(put, stats, flush_interval_s=3600)
        dims = (("InstanceId", "i-9"), ("InstanceType", "trn1.2xlarge"))
        outcomes = []

        async def actions(p: Publisher) -> None:
            for step, mode in enumerate(("throttle", "error500", "drop")):
                proxy.fault(mode, count=10)  # more failures than botocore's own retries absorb
                p.submit([Datum("Points", dims, 1.0, "Count", time.time()) for _ in range(10 * (step + 1))])
                outcomes.append(await p.flush())
                proxy.fault("pass")
                p._retry_at = 0.0  # skip the backoff wait in the test
                outcomes.append(await p.flush())

        run_publisher(publisher, actions)
        assert outcomes == [False, True, False, True, False, True]
        assert stats.failures_total == 3 and stats.dropped_total == 0
        total = metric_sum(cloudwatch(moto), "NM/Faults", "Points",
                           [{"Name": "InstanceId", "Value": "i-9"}, {"Name": "InstanceType", "Value": "trn1.2xlarge"}],
                           stat="SampleCount")
        assert total == 10 + 20 + 30  # every point arrived exactly once
        assert proxy.stats()["put_failed"] >= 9  # botocore retried each failure before giving up


def test_a_stalled_endpoint_never_delays_stdout_or_prometheus() -> None:
    from tests.prometheus_server import free_port
    from tests.test_prometheus_endpoint import get

    with moto_server() as moto, fault_proxy(moto) as proxy:
        proxy.fault("stall", seconds=60)
        port = free_port()
        proc = subprocess.Popen(
            monitor_command("--emulate", "trn1.32xlarge", "-c", ALL_1S, "--cloudwatch-namespace", "NM/Stall",
                            "--cloudwatch-region", "us-east-1", "--cloudwatch-endpoint-url", proxy.url,
                            "--cloudwatch-flush-interval", "1s", "--prometheus-port", str(port),
                            "--prometheus-address", "127.0.0.1"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env())
        try:
            times = read_reports(proc, 8)
            gaps = [b - a for a, b in itertools.pairwise(times)]
            assert max(gaps) < 1.5, gaps  # one report a second while every PutMetricData hangs
            started = time.monotonic()
            status, _, body = get(f"http://127.0.0.1:{port}/metrics")
            assert status == 200 and time.monotonic() - started < 1.0
            assert b'neuron_monitor_exporter_failures_total' in body
            assert proxy.stats()["put_failed"] >= 1  # the publisher really was stuck on the endpoint
        finally:
            proc.terminate()
            proc.communicate(timeout=15)
        assert proc.returncode == 0  # SIGTERM gave up on the stalled flush within its deadline


def test_pipeline_publishes_what_it_reads() -> None:
    with moto_server() as moto:
        daemon = subprocess.run(monitor_command("--once", "--emulate", "inf2.xlarge", "-c", ALL_1S),
                                capture_output=True, env=subprocess_env(), timeout=60, check=True)
        lines = daemon.stdout + b"garbage line\n" + daemon.stdout
        result = subprocess.run(
            [sys.executable, "-m", "exporters.cloudwatch.pipeline", "--namespace", "NM/Pipe", "--region",
             "us-east-1", "--endpoint-url", moto, "--flush-interval", "1h"],
            input=lines, capture_output=True, env=subprocess_env(), timeout=60, check=False)
        assert result.returncode == 0, result.stderr
        assert result.stderr.count(b"skipped") == 1
        names = {m["MetricName"] for m in cloudwatch(moto).list_metrics(Namespace="NM/Pipe")["Metrics"]}
        assert {"NeuronCoreUtilization", "HostMemoryUsed", "Executions"} <= names


def test_boto3_is_imported_only_when_cloudwatch_is_on() -> None:
    def imported(*extra: str) -> bool:
        result = subprocess.run([sys.executable, "-X", "importtime", "-m", "neuron_monitor", "--once", "--emulate",
                                 "inf2.xlarge", *extra], capture_output=True, env=subprocess_env(), timeout=60,
                                check=True)
        modules = {line.rsplit(b"|", 1)[-1].strip() for line in result.stderr.splitlines()
                   if line.startswith(b"import time:")}
        assert b"neuron_monitor.cli" in modules  # -X importtime really reported our imports
        return bool(modules & {b"boto3", b"botocore"})

    assert not imported()
    with moto_server() as moto:
        assert imported("--cloudwatch-namespace", "X", "--cloudwatch-region", "us-east-1",
                        "--cloudwatch-endpoint-url", moto)


def test_environment_turns_it_on() -> None:
    with moto_server() as moto:
        env = subprocess_env(NEURON_MONITOR_CW_REGION="us-east-1", NEURON_MONITOR_CW_NAMESPACE="NM/Env")
        result = subprocess.run(monitor_command("--once", "--emulate", "inf2.xlarge", "--cloudwatch-endpoint-url",
                                                moto), capture_output=True, env=env, timeout=60, check=False)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)
        names = {m["MetricName"] for m in cloudwatch(moto).list_metrics(Namespace="NM/Env")["Metrics"]}
        assert "HostMemoryUsed" in names
