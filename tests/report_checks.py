"""Checks of a report's shape and internal consistency, shared by the CLI and contract tests."""

from __future__ import annotations

import json
from typing import Any

from neuron_monitor.report import PERCENTILES, RUNTIME_GROUPS, SYSTEM_GROUPS, Report

TOP_KEYS = {"neuron_runtime_data", "system_data", "instance_info", "neuron_hardware_info"}


def parse_line(line: bytes | str) -> tuple[dict[str, Any], Report]:
    data = json.loads(line)
    return data, Report.model_validate(data)


def check_report(data: dict[str, Any], runtime_groups: set[str] | None = None,
                 system_groups: set[str] | None = None) -> None:
    """Exact keys, and the invariants that must hold between groups."""
    assert set(data) == TOP_KEYS, set(data)
    assert set(data["instance_info"]) == {"instance_name", "instance_id", "instance_type",
                                          "instance_availability_zone", "instance_availability_zone_id",
                                          "instance_region", "ami_id", "subnet_id", "error"}
    hw = data["neuron_hardware_info"]
    assert {"neuron_device_type", "neuroncore_version", "neuron_device_count", "neuron_device_memory_size",
            "neuroncore_per_device_count", "error"} <= set(hw)
    if system_groups is not None:
        assert set(data["system_data"]) == system_groups
    for name, group in data["system_data"].items():
        assert name in SYSTEM_GROUPS
        assert isinstance(group["period"], float) and isinstance(group["error"], str)
    per_device = hw["neuroncore_per_device_count"]
    for entry in data["neuron_runtime_data"]:
        assert set(entry) == {"pid", "address", "neuron_runtime_tag", "error", "report"}
        assert isinstance(entry["pid"], int) and isinstance(entry["neuron_runtime_tag"], str)
        report = entry["report"]
        if runtime_groups is not None:
            assert set(report) == runtime_groups, (entry["pid"], set(report))
        for name in report:
            assert name in RUNTIME_GROUPS
        check_runtime(report, per_device, hw.get("logical_neuroncore_config"))


def check_runtime(report: dict[str, Any], per_device: int, lnc: int | None) -> None:
    nc = report.get("neuroncore_counters")
    if nc:
        for usage in nc["neuroncores_in_use"].values():
            assert 0.0 <= usage["neuroncore_utilization"] <= 100.0
            assert usage["flops"] >= 0
            assert ("v3d" in usage) == bool(lnc)
    ex = report.get("execution_stats")
    if ex:
        for value in (*ex["error_summary"].values(), *ex["execution_summary"].values()):
            assert isinstance(value, int) and value >= 0
        total, device = ex["latency_stats"]["total_latency"], ex["latency_stats"]["device_latency"]
        assert (total is None) == (device is None)
        if total is not None:
            values = [total[p] for p in PERCENTILES]
            assert values == sorted(values)
            assert device["p50"] <= total["p50"] + 1e-9
    mem = report.get("memory_used")
    if mem:
        used = mem["neuron_runtime_used_bytes"]
        assert used["host"] == sum(used["usage_breakdown"]["host"].values())
        per_core = used["usage_breakdown"]["neuroncore_memory_usage"]
        assert used["neuron_device"] == sum(sum(c.values()) for c in per_core.values())
        if nc:
            assert set(per_core) == set(nc["neuroncores_in_use"])
        for model in mem["loaded_models"]:
            for sg in model["subgraphs"].values():
                m = sg["memory_used_bytes"]
                assert m["host"] == sum(m["usage_breakdown"]["host"].values())
                assert m["neuron_device"] == sum(m["usage_breakdown"]["neuron_device"].values())
                assert str(sg["neuroncore_index"]) in per_core
                assert sg["neuron_device_index"] == sg["neuroncore_index"] // per_device
    vcpu = report.get("neuron_runtime_vcpu_usage")
    if vcpu:
        assert vcpu["vcpu_usage"]["user"] >= 0 and vcpu["vcpu_usage"]["system"] >= 0
