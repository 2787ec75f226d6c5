"""SIGHUP on the real process: a valid config takes effect, an invalid one is rejected."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from tests.conftest import monitor_command, subprocess_env
from tests.test_cli import read_line


def write(path: Path, data: object) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def test_sighup_applies_valid_and_rejects_invalid_config(tmp_path: Path) -> None:
    config = tmp_path / "monitor.json"
    write(config, {"period": "500ms", "system_metrics": [{"type": "memory_info"}]})
    proc = subprocess.Popen(monitor_command("--emulate", "trn1.2xlarge", "-c", str(config), "--verbose", "2"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env())
    try:
        first = json.loads(read_line(proc))
        assert set(first["system_data"]) == {"memory_info"}
        assert first["neuron_runtime_data"] == []

        write(config, {"period": "500ms", "system_metrics": [{"type": "vcpu_usage"}],
                       "neuron_runtimes": [{"metrics": [{"type": "neuroncore_counters"}]}]})
        proc.send_signal(signal.SIGHUP)
        for _ in range(10):
            data = json.loads(read_line(proc))
            if "vcpu_usage" in data["system_data"] and data["neuron_runtime_data"]:
                break
        assert set(data["system_data"]) == {"vcpu_usage"}
        assert all(set(e["report"]) <= {"neuroncore_counters"} for e in data["neuron_runtime_data"])

        write(config, {"period": "500ms", "system_metrics": [{"type": "not_a_group"}]})
        proc.send_signal(signal.SIGHUP)
        for _ in range(3):
            data = json.loads(read_line(proc))
        assert set(data["system_data"]) == {"vcpu_usage"}  # the old config stayed
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=5)
    assert proc.returncode == 0
    assert b"config not reloaded" in err and b"not_a_group" in err
