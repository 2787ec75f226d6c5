"""neuron-monitor on the sysfs backend, over trees kept up to date by a real emulator process
running real application processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neuron_monitor.report import RUNTIME_GROUPS, SYSTEM_GROUPS
from tests.conftest import REPO_ROOT, monitor_command, subprocess_env
from tests.emulator_process import monitor_args, pid_alive, running_emulator
from tests.report_checks import check_report
from tests.test_cli import read_line

ALL_1S = str(REPO_ROOT / "configs" / "all-groups-1s.json")


@pytest.mark.parametrize("instance", ["trn1.32xlarge", "trn2.48xlarge"])
def test_monitor_sees_the_emulated_applications(tmp_path: Path, instance: str) -> None:
    with running_emulator(tmp_path, instance, cpu_scale=0.05) as (_, manifest):
        expected = {a["pid"]: a for a in manifest["applications"]}
        assert len(expected) == 16
        monitor = subprocess.Popen(monitor_command(*monitor_args(tmp_path), "-c", ALL_1S), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=subprocess_env())
        try:
            # 16 Python processes start on a small machine: wait until all hold their devices
            for _ in range(20):
                last = json.loads(read_line(monitor, 15))
                if {e["pid"] for e in last["neuron_runtime_data"]} == set(expected):
                    break
            for _ in range(2):  # then two full periods for every group
                last = json.loads(read_line(monitor, 15))
            check_report(last, set(RUNTIME_GROUPS), set(SYSTEM_GROUPS))
            hw = last["neuron_hardware_info"]
            assert hw["neuron_device_count"] == 16 and hw["error"] == ""
            seen = {e["pid"]: e for e in last["neuron_runtime_data"]}
            assert set(seen) == set(expected)
            for pid, entry in seen.items():
                want = expected[pid]
                assert entry["neuron_runtime_tag"] == want["tag"]
                assert entry["error"] == ""
                cores = entry["report"]["neuroncore_counters"]["neuroncores_in_use"]
                assert sorted(map(int, cores)) == want["cores"]
                ex = entry["report"]["execution_stats"]
                assert ex["execution_summary"]["completed"] > 0
                assert ex["latency_stats"]["total_latency"] is None  # sysfs has no latencies
                assert any(c["neuroncore_utilization"] > 0 for c in cores.values())
                assert entry["report"]["memory_used"]["neuron_runtime_used_bytes"]["neuron_device"] > 0
            # CPU: each child burns ~cpu_user+cpu_system percent of a CPU; summed over the
            # applications and the last reports it must be of that order (loose: 2 shared cores).
            total_expected = sum(a["cpu_user"] + a["cpu_system"] for a in expected.values())
            total_seen = sum(sum(e["report"]["neuron_runtime_vcpu_usage"]["vcpu_usage"].values())
                             for e in last["neuron_runtime_data"])
            assert 0.3 * total_expected < total_seen < 2.0 * total_expected

            victim = sorted(expected)[3]
            os.kill(victim, signal.SIGKILL)
            for _ in range(3):
                data = json.loads(read_line(monitor, 15))
            assert victim not in {e["pid"] for e in data["neuron_runtime_data"]}
            assert len(data["neuron_runtime_data"]) == 15
        finally:
            monitor.terminate()
            _, err = monitor.communicate(timeout=10)
        assert monitor.returncode == 0, err
        assert b"Traceback" not in err


def test_corrupted_and_vanishing_files_give_errors_not_crashes(tmp_path: Path) -> None:
    with running_emulator(tmp_path, "trn1.2xlarge", cpu_scale=0.05) as (emulator, _manifest):
        monitor = subprocess.Popen(monitor_command(*monitor_args(tmp_path), "-c", ALL_1S), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=subprocess_env())
        try:
            read_line(monitor, 15)
            emulator.send_signal(signal.SIGSTOP)  # hold the files still while we break them
            device = tmp_path / "sys/devices/virtual/neuron_device/neuron0"
            (device / "neuron_core1/stats/other_info/nc_time_in_use/total").write_bytes(b"\x00garbage\n")
            for _ in range(2):
                data = json.loads(read_line(monitor, 15))
            entry = data["neuron_runtime_data"][0]
            assert "nc_time_in_use" in entry["report"]["neuroncore_counters"]["error"]
            assert data["system_data"]["memory_info"]["error"] == ""
            assert data["system_data"]["neuron_hw_counters"]["error"] == ""
            # the device goes away altogether
            device.rename(tmp_path / "gone")
            for _ in range(2):
                data = json.loads(read_line(monitor, 15))
            assert data["neuron_hardware_info"]["neuron_device_count"] == 0
            assert data["system_data"]["vcpu_usage"]["error"] == ""
            (tmp_path / "gone").rename(device)
            emulator.send_signal(signal.SIGCONT)
            for _ in range(3):
                data = json.loads(read_line(monitor, 15))
            assert data["neuron_hardware_info"]["neuron_device_count"] == 1
            assert data["neuron_runtime_data"][0]["report"]["neuroncore_counters"]["error"] == ""
        finally:
            emulator.send_signal(signal.SIGCONT)
            monitor.terminate()
            _, err = monitor.communicate(timeout=10)
        assert monitor.returncode == 0
        assert b"Traceback" not in err


def test_children_die_with_a_killed_emulator(tmp_path: Path) -> None:
    with running_emulator(tmp_path, "inf2.xlarge") as (emulator, manifest):
        pids = [a["pid"] for a in manifest["applications"]]
        assert pids and all(pid_alive(p) for p in pids)
        emulator.kill()
        emulator.wait()
        deadline = time.monotonic() + 5
        while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(pid_alive(p) for p in pids)


def test_emulator_rejects_bad_arguments(tmp_path: Path) -> None:
    bad = tmp_path / "s.json"
    bad.write_text('{"applications": [{"cores": "0-99"}]}')
    result = subprocess.run(
        [sys.executable, "-m", "neuron_monitor.emulator.main", "--instance-type", "trn1.2xlarge",
         "--root", str(tmp_path), "--scenario", str(bad)],
        capture_output=True, env=subprocess_env(), timeout=30, check=False)
    assert result.returncode == 2
    assert b"applications[0].cores: core 99 does not exist" in result.stderr
