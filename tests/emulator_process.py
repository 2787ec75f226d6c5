"""Starts `neuron-monitor-emulator` as a real process for a test and stops it afterwards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.conftest import subprocess_env


@contextmanager
def running_emulator(root: Path, instance: str, *extra: str, cpu_scale: float = 0.02,
                     tick: str = "100ms") -> Iterator[tuple[subprocess.Popen[bytes], dict[str, Any]]]:
    cmd = [sys.executable, "-m", "neuron_monitor.emulator.main", "--instance-type", instance, "--root", str(root),
           "--cpu-scale", str(cpu_scale), "--tick", tick, "--duration", "10m", *extra]
    proc = subprocess.Popen(cmd, env=subprocess_env(), stderr=subprocess.PIPE)
    manifest = root / "emulator.json"
    try:
        deadline = time.monotonic() + 30
        while not manifest.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
            assert time.monotonic() < deadline, "emulator did not start"
            time.sleep(0.05)
        yield proc, json.loads(manifest.read_text())
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def monitor_args(root: Path) -> list[str]:
    return ["--backend", "sysfs", "--sysfs-path", str(root / "sys"), "--procfs-path", "/proc",
            "--devfs-path", str(root / "dev")]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
