"""The real CLI as a subprocess: reports on stdout, errors on stderr, signals, closed pipes."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from neuron_monitor.report import RUNTIME_GROUPS, SYSTEM_GROUPS
from tests.conftest import REPO_ROOT, monitor_command, subprocess_env
from tests.report_checks import check_report, parse_line

ALL_1S = str(REPO_ROOT / "configs" / "all-groups-1s.json")


def run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(monitor_command(*args), capture_output=True, timeout=timeout, env=subprocess_env(),
                          check=False)


def start(*args: str, **kwargs: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(monitor_command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=subprocess_env(), **kwargs)  # type: ignore[call-overload]


def read_line(proc: subprocess.Popen[bytes], timeout: float = 10) -> bytes:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "no report within the timeout"
    line = proc.stdout.readline()
    assert line.endswith(b"\n")
    return line


@pytest.mark.parametrize("instance", ["trn2.48xlarge", "trn1.32xlarge", "inf1.xlarge", "inf2.48xlarge"])
def test_once_prints_one_complete_report(instance: str) -> None:
    result = run("--once", "--emulate", instance, "-c", ALL_1S)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    data, _ = parse_line(lines[0])
    check_report(data, set(RUNTIME_GROUPS), set(SYSTEM_GROUPS))
    hw = data["neuron_hardware_info"]
    assert data["instance_info"]["instance_type"] == instance
    assert data["instance_info"]["error"] == ""
    expected_devices = {"trn2.48xlarge": 16, "trn1.32xlarge": 16, "inf1.xlarge": 1, "inf2.48xlarge": 12}[instance]
    assert hw["neuron_device_count"] == expected_devices
    assert len(data["neuron_runtime_data"]) == expected_devices  # the default scenario: one app per device
    if instance.startswith("trn2"):
        assert (hw["neuron_device_type"], hw["neuroncore_version"], hw["neuroncore_per_device_count"],
                hw["logical_neuroncore_config"]) == ("trainium2", "v3d", 4, 2)
    assert result.stderr == b""  # verbosity 0 is silent


def test_stream_periods_and_invariants() -> None:
    proc = start("--emulate", "trn2.48xlarge", "-c", ALL_1S)
    try:
        lines = [read_line(proc) for _ in range(4)]
    finally:
        proc.terminate()
        proc.wait(5)
    reports = [json.loads(line) for line in lines]
    for data in reports:
        check_report(data, set(RUNTIME_GROUPS), set(SYSTEM_GROUPS))
    for data in reports[2:]:  # after the short first period, every group's period is ~1 s
        for group in data["system_data"].values():
            assert 0.9 < group["period"] < 1.2
        for entry in data["neuron_runtime_data"]:
            for group in entry["report"].values():
                assert 0.9 < group["period"] < 1.2
    last = reports[-1]["neuron_runtime_data"]
    assert sum(e["report"]["execution_stats"]["execution_summary"]["completed"] for e in last) > 0
    assert any(u["neuroncore_utilization"] > 0 for e in last
               for u in e["report"]["neuroncore_counters"]["neuroncores_in_use"].values())


def test_sigterm_exits_zero_quickly_with_complete_output() -> None:
    proc = start("--emulate", "trn1.2xlarge", "-c", ALL_1S)
    read_line(proc)
    proc.send_signal(signal.SIGTERM)
    started = time.monotonic()
    out, err = proc.communicate(timeout=5)
    assert time.monotonic() - started < 2.0
    assert proc.returncode == 0, err
    for line in out.splitlines():
        json.loads(line)  # nothing torn
    assert b"Traceback" not in err


def test_sigint_exits_zero() -> None:
    proc = start("--emulate", "inf2.xlarge", "-c", ALL_1S)
    read_line(proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=5)
    assert proc.returncode == 0, err


def test_closed_stdout_ends_cleanly() -> None:
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(monitor_command("--emulate", "trn1.2xlarge", "-c", ALL_1S, "--verbose", "1"),
                            stdout=write_fd, stderr=subprocess.PIPE, env=subprocess_env())
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as reader:
        assert reader.readline()
    _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert b"Traceback" not in err and b"BrokenPipe" not in err


def test_verbose_diagnostics_go_to_stderr_only() -> None:
    result = run("--once", "--emulate", "trn1.2xlarge", "-c", ALL_1S, "--verbose", "4")
    assert result.returncode == 0
    for line in result.stdout.splitlines():
        json.loads(line)
    assert b"DEBUG" in result.stderr or b"INFO" in result.stderr


def test_bad_config_exits_2_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"neuron_runtimes": [{"metrics": [{"type": "inference_stats"}]}]}))
    result = run("--emulate", "trn1.2xlarge", "-c", str(config))
    assert result.returncode == 2
    assert result.stdout == b""
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1
    assert 'neuron_runtimes[0].metrics[0].type: "inference_stats" was renamed to "execution_stats"' in lines[0]


def test_auto_backend_without_driver_points_at_emulate(tmp_path: Path) -> None:
    result = run("--sysfs-path", str(tmp_path))
    assert result.returncode == 2
    assert b"--emulate" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--verbose", "7"], b"expected 0-4"), (["--emulate", "p5.48xlarge"], b"unknown instance type"),
     (["--emulate", "trn1.2xlarge", "--backend", "sysfs"], b"cannot be combined")],
)
def test_usage_errors_exit_2(args: list[str], message: bytes) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert message in result.stderr


def test_version() -> None:
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.startswith(b"neuron-monitor ")
