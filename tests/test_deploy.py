"""Deployment artifacts, each checked by its ecosystem's own tool."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from neuron_monitor.catalogue import INSTANCE_TYPES
from neuron_monitor.config import parse_config
from tests.prometheus_server import PROMTOOL

REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy"
BIN = Path(sys.executable).parent
SECURITY_THRESHOLD = 2.5  # systemd-analyze's exposure score (0 safest .. 10); ours is quoted in the README


def unit_for_checks(tmp_path: Path) -> Path:
    """The unit with ExecStart pointing at this checkout's executable (verify wants it to exist)."""
    unit = (DEPLOY / "systemd" / "neuron-monitor.service").read_text()
    unit = unit.replace("/usr/local/bin/neuron-monitor", str(BIN / "neuron-monitor"))
    path = tmp_path / "neuron-monitor.service"
    path.write_text(unit)
    return path


def test_systemd_unit_verifies(tmp_path: Path) -> None:
    result = subprocess.run(["systemd-analyze", "verify", str(unit_for_checks(tmp_path))], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "neuron-monitor.service" not in result.stderr  # no warning about our unit


def test_systemd_security_score(tmp_path: Path) -> None:
    result = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(unit_for_checks(tmp_path))],
                            capture_output=True, text=True, check=False)
    match = re.search(r"Overall exposure level for neuron-monitor.service: ([\d.]+)", result.stdout)
    assert match, result.stdout + result.stderr
    score = float(match.group(1))
    assert score <= SECURITY_THRESHOLD
    readme = (REPO / "README.md").read_text()
    assert f"exposure {score}" in readme  # the README quotes the current score


def test_systemd_unit_settings() -> None:
    unit = (DEPLOY / "systemd" / "neuron-monitor.service").read_text()
    for line in ("DynamicUser=yes", "NoNewPrivileges=yes", "ProtectSystem=strict", "PrivateTmp=yes",
                 "ReadOnlyPaths=/sys", "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX", "Restart=on-failure",
                 "EnvironmentFile=-/etc/neuron-monitor/neuron-monitor.env", "ExecReload=/bin/kill -HUP $MAINPID"):
        assert line in unit.splitlines(), line
    parse_config(json.loads((DEPLOY / "systemd" / "monitor.json").read_text()))


def test_dockerfile_is_hadolint_clean() -> None:
    hadolint = shutil.which("hadolint") or str(BIN / "hadolint")
    result = subprocess.run([hadolint, str(DEPLOY / "container" / "Dockerfile")], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_container_dependencies_are_pinned_and_complete() -> None:
    pins = {}
    for line in (DEPLOY / "container" / "requirements.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"not pinned: {line}"
            pins[name.lower().replace("_", "-")] = version
    project = (REPO / "pyproject.toml").read_text()
    runtime = re.search(r"dependencies = \[(.*?)\]", project, re.S)
    assert runtime
    for dep in re.findall(r'"([A-Za-z0-9_.-]+)', runtime.group(1)):
        assert dep.lower().replace("_", "-") in pins, dep
    dockerfile = (DEPLOY / "container" / "Dockerfile").read_text()
    assert "USER 10001" in dockerfile and "slim" in dockerfile


def manifests() -> list[Path]:
    return sorted((DEPLOY / "kubernetes").glob("*.yaml"))


def test_kubernetes_manifests_validate() -> None:
    kinds = {yaml.safe_load(p.read_text())["kind"]: p for p in manifests()}
    core = [str(p) for kind, p in kinds.items() if kind not in ("ServiceMonitor", "Kustomization")]
    result = subprocess.run([str(BIN / "kubernetes-validate"), "--strict", "-k", "1.37.0", *core],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("passed") == len(core)
    kustomization = yaml.safe_load(kinds["Kustomization"].read_text())
    assert sorted(kustomization["resources"]) == sorted(p.name for p in manifests() if p.name != "kustomization.yaml")


# The parts of the Prometheus Operator's ServiceMonitor (monitoring.coreos.com/v1) that we use,
# written from its API reference; kubernetes-validate has no schema for custom resources.
SERVICEMONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {"type": "object", "required": ["name", "namespace"]},
        "spec": {
            "type": "object", "additionalProperties": False, "required": ["selector", "endpoints"],
            "properties": {
                "selector": {"type": "object", "properties": {"matchLabels": {"type": "object"}}},
                "namespaceSelector": {"type": "object", "properties": {"matchNames": {"type": "array"}}},
                "endpoints": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "additionalProperties": False,
                    "properties": {
                        "port": {"type": "string"}, "path": {"type": "string"},
                        "interval": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                        "scrapeTimeout": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                        "scheme": {"enum": ["http", "https"]},
                        "relabelings": {"type": "array", "items": {"type": "object"}},
                    }}},
            },
        },
    },
}


def test_servicemonitor_matches_the_service() -> None:
    monitor = yaml.safe_load((DEPLOY / "kubernetes" / "servicemonitor.yaml").read_text())
    jsonschema.validate(monitor, SERVICEMONITOR_SCHEMA)
    service = yaml.safe_load((DEPLOY / "kubernetes" / "service.yaml").read_text())
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}


def test_daemonset_shape() -> None:
    ds = yaml.safe_load((DEPLOY / "kubernetes" / "daemonset.yaml").read_text())
    pod = ds["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    types = set(terms[0]["matchExpressions"][0]["values"])
    assert types == set(INSTANCE_TYPES)  # every Neuron instance type, trn2 included
    assert {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    container = pod["containers"][0]
    args = container["args"]
    assert "--sysfs-path=/host/sys" in args and "--procfs-path=/host/proc" in args
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    security = container["securityContext"]
    assert security["privileged"] is False and security["readOnlyRootFilesystem"] is True
    assert security["capabilities"]["drop"] == ["ALL"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/host/sys"]["readOnly"] and mounts["/host/proc"]["readOnly"]
    assert not pod.get("hostPID") and not pod.get("hostNetwork")
    config = yaml.safe_load((DEPLOY / "kubernetes" / "configmap.yaml").read_text())
    parse_config(json.loads(config["data"]["monitor.json"]))


def test_alert_rules_check_and_unit_tests() -> None:
    rules = DEPLOY / "prometheus" / "neuron-monitor-alerts.yml"
    check = subprocess.run([PROMTOOL, "check", "rules", str(rules)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    test = subprocess.run([PROMTOOL, "test", "rules", "neuron-monitor-alerts.test.yml"], cwd=rules.parent,
                          capture_output=True, text=True, check=False)
    assert test.returncode == 0, test.stdout + test.stderr
    assert "SUCCESS" in test.stdout


def test_dashboard_is_generated_from_its_source() -> None:
    generated = subprocess.run([sys.executable, str(REPO / "grafana" / "build_dashboard.py")], capture_output=True,
                               check=True).stdout
    assert json.loads(generated) == json.loads((REPO / "grafana" / "neuron-monitor.json").read_text())


@pytest.mark.parametrize("variable", ["datasource", "instance", "device"])
def test_dashboard_has_template_variables(variable: str) -> None:
    board = json.loads((REPO / "grafana" / "neuron-monitor.json").read_text())
    assert variable in {v["name"] for v in board["templating"]["list"]}
