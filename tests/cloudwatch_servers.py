"""moto in server mode (a real HTTP CloudWatch endpoint) and the fault proxy, as processes."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3

from tests.conftest import subprocess_env
from tests.prometheus_server import free_port

MOTO_SERVER = str(Path(sys.executable).parent / "moto_server")


def _wait(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not start") from None
            time.sleep(0.1)


@contextmanager
def moto_server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([MOTO_SERVER, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=subprocess_env())
    try:
        url = f"http://127.0.0.1:{port}"
        _wait(url + "/moto-api/", proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


class FaultProxy:
    def __init__(self, url: str) -> None:
        self.url = url

    def fault(self, mode: str, count: int = 1000000, seconds: float = 30) -> None:
        req = urllib.request.Request(f"{self.url}/_fault?mode={mode}&count={count}&seconds={seconds}", method="POST")
        with urllib.request.urlopen(req, timeout=5):
            pass

    def stats(self) -> dict[str, int]:
        with urllib.request.urlopen(f"{self.url}/_stats", timeout=5) as resp:
            return dict(json.loads(resp.read()))


@contextmanager
def fault_proxy(upstream: str) -> Iterator[FaultProxy]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.fault_proxy", str(port), upstream],
                            stdout=subprocess.PIPE, env=subprocess_env())
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        yield FaultProxy(f"http://127.0.0.1:{port}")
    finally:
        proc.terminate()
        proc.wait(10)


def cloudwatch(endpoint: str) -> Any:
    return boto3.client("cloudwatch", region_name="us-east-1", endpoint_url=endpoint,
                        aws_access_key_id="testing", aws_secret_access_key="testing")  # noqa: S106 - moto


def metric_sum(client: Any, namespace: str, name: str, dimensions: list[dict[str, str]],
               stat: str = "Sum") -> float:
    now = datetime.datetime.now(datetime.UTC)
    result = client.get_metric_data(
        MetricDataQueries=[{"Id": "m", "MetricStat": {"Metric": {"Namespace": namespace, "MetricName": name,
                                                                  "Dimensions": dimensions},
                                                       "Period": 60, "Stat": stat}}],
        StartTime=now - datetime.timedelta(minutes=30), EndTime=now + datetime.timedelta(minutes=5))
    return float(sum(result["MetricDataResults"][0]["Values"]))
