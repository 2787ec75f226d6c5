"""A real Prometheus server on loopback for tests: scrapes given targets, answers queries.

    with PrometheusServer(tmp_path, targets=["127.0.0.1:9100"]) as prom:
        prom.wait_for_series('neuroncore_utilization_ratio')
        prom.query('sum(rate(execution_status_total[30s]))')
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrometheusServer:
    def __init__(self, workdir: Path, targets: list[str], interval: str = "1s", rule_files: list[Path] = (),  # type: ignore[assignment]
                 scheme: str = "http", extra_job: dict[str, Any] | None = None) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        job: dict[str, Any] = {"job_name": "neuron-monitor", "scheme": scheme,
                               "static_configs": [{"targets": targets}]}
        if extra_job:
            job.update(extra_job)
        config = {"global": {"scrape_interval": interval, "evaluation_interval": interval},
                  "rule_files": [str(p) for p in rule_files], "scrape_configs": [job]}
        self.config_path = workdir / "prometheus.yml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PrometheusServer:
        log = open(self.workdir / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={self.config_path}", f"--storage.tsdb.path={self.workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h",
             "--web.enable-lifecycle"], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"prometheus did not start: {(self.workdir / 'prometheus.log').read_text()[-2000:]}")
            time.sleep(0.2)
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.api("query", query=expr)["result"])

    def wait_for(self, expr: str, timeout: float = 30, min_results: int = 1) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            result = self.query(expr)
            if len(result) >= min_results:
                return result
            if time.monotonic() > deadline:
                targets = self.api("targets")
                raise AssertionError(f"{expr!r} returned {result} after {timeout}s; targets: {targets}")
            time.sleep(0.5)
