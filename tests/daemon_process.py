"""The real daemon as a subprocess with its Prometheus endpoint, for exporter tests."""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from tests.conftest import REPO_ROOT, monitor_command, subprocess_env
from tests.prometheus_server import free_port

ALL_1S = str(REPO_ROOT / "configs" / "all-groups-1s.json")


def wait_http(url: str, timeout: float = 30, context: object = None) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as resp:  # type: ignore[arg-type]
                if resp.status == 200:
                    return
        except urllib.error.HTTPError:
            pass
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} did not answer")
        time.sleep(0.1)


@contextmanager
def running_daemon(*args: str, port: int | None = None, ready_path: str = "/ready", scheme: str = "http",
                   context: object = None, stdout: int = subprocess.DEVNULL,
                   ) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = port or free_port()
    proc = subprocess.Popen(monitor_command(*args, "--prometheus-port", str(port), "--prometheus-address",
                                            "127.0.0.1"),
                            stdout=stdout, stderr=subprocess.PIPE, env=subprocess_env())
    try:
        wait_http(f"{scheme}://127.0.0.1:{port}{ready_path}", context=context)
        yield proc, port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
