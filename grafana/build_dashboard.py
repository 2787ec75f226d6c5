"""Generates grafana/neuron-monitor.json (the dashboard is data; this keeps it readable).

    .venv/bin/python grafana/build_dashboard.py > grafana/neuron-monitor.json

Variables: $datasource (Prometheus), $instance (instance_id), $device (neuron_device).
"""

from __future__ import annotations

import json
from typing import Any

INST = 'instance_id=~"$instance"'
DEV = 'neuron_device=~"$device"'


def panel(title: str, targets: list[tuple[str, str]], x: int, y: int, w: int = 12, h: int = 8,
          kind: str = "timeseries", unit: str = "short", description: str = "") -> dict[str, Any]:
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}} if kind == "timeseries" else {},
        "targets": [{"refId": chr(65 + i), "expr": expr, "legendFormat": legend,
                     "datasource": {"type": "prometheus", "uid": "${datasource}"}}
                    for i, (expr, legend) in enumerate(targets)],
    }


def row(title: str, y: int) -> dict[str, Any]:
    return {"type": "row", "title": title, "collapsed": False, "gridPos": {"x": 0, "y": y, "w": 24, "h": 1},
            "panels": []}


def dashboard() -> dict[str, Any]:
    p: list[dict[str, Any]] = []
    y = 0
    p.append(row("Instances", y))
    y += 1
    p += [
        panel("Instances", [(f"count(instance_info{{{INST}}})", "instances")], 0, y, 4, 4, "stat"),
        panel("Neuron devices in use", [(f"count(count by (instance_id, neuron_device) "
                                         f"(neuroncore_utilization_ratio{{{INST}}}))", "devices")], 4, y, 4, 4, "stat"),
        panel("NeuronCores in use", [(f"count(neuroncore_utilization_ratio{{{INST},{DEV}}})", "cores")],
              8, y, 4, 4, "stat"),
        panel("Instance details", [(f"instance_info{{{INST}}}", "{{instance_type}} {{instance_id}} {{region}}")],
              12, y, 12, 4, "table"),
    ]
    y += 4
    p.append(row("Host", y))
    y += 1
    p += [
        panel("vCPU usage", [(f"system_vcpu_usage_ratio{{{INST}}}", "{{instance_id}} {{usage_type}}")],
              0, y, 8, unit="percentunit"),
        panel("Memory used", [(f"system_memory_used_bytes{{{INST}}}", "{{instance_id}} used"),
                              (f"system_memory_total_bytes{{{INST}}}", "{{instance_id}} total")], 8, y, 8, unit="bytes"),
        panel("vCPUs", [(f"system_vcpu_count{{{INST}}}", "{{instance_id}}")], 16, y, 8, kind="stat"),
    ]
    y += 8
    p.append(row("NeuronCores", y))
    y += 1
    p += [
        panel("NeuronCore utilization (per core)",
              [(f"neuroncore_utilization_ratio{{{INST},{DEV}}}", "nc{{neuroncore}} {{runtime_tag}}")], 0, y, 12,
              unit="percentunit"),
        panel("Utilization per device", [(f"avg by (instance_id, neuron_device) "
                                          f"(neuroncore_utilization_ratio{{{INST},{DEV}}})",
                                          "{{instance_id}} device {{neuron_device}}")], 12, y, 12, unit="percentunit"),
        panel("Utilization heat map", [(f"avg by (neuroncore) (neuroncore_utilization_ratio{{{INST},{DEV}}})",
                                        "{{neuroncore}}")], 0, y + 8, 12, kind="heatmap", unit="percentunit"),
        panel("FLOPS per device", [(f"sum by (neuron_device) (neuroncore_flops{{{INST},{DEV}}})",
                                    "device {{neuron_device}}")], 12, y + 8, 12, unit="short"),
    ]
    y += 16
    p.append(row("Executions", y))
    y += 1
    p += [
        panel("Execution success rate", [(f"sum(rate(execution_status_total{{{INST},status_type=\"completed\"}}[2m]))",
                                          "completed/s")], 0, y, 8, unit="ops"),
        panel("Execution outcomes", [(f"sum by (status_type) (rate(execution_status_total{{{INST}}}[2m]))",
                                      "{{status_type}}")], 8, y, 8, unit="ops"),
        panel("Errors by type", [(f"sum by (error_type) (rate(execution_errors_total{{{INST}}}[2m]))",
                                  "{{error_type}}")], 16, y, 8, unit="ops"),
        panel("Latency (total)", [(f"max by (percentile) (execution_latency_seconds{{{INST},"
                                   f"percentile=~\"p50|p99|p100\"}})", "{{percentile}}")], 0, y + 8, 12, unit="s"),
        panel("Latency (device)", [(f"max by (percentile) (neuron_execution_device_latency_seconds{{{INST},"
                                    f"percentile=~\"p50|p99|p100\"}})", "{{percentile}}")], 12, y + 8, 12, unit="s"),
    ]
    y += 16
    p.append(row("Neuron applications", y))
    y += 1
    p += [
        panel("Runtime vCPU", [(f"sum by (runtime_tag, usage_type) (neuron_runtime_vcpu_usage_ratio{{{INST}}})",
                                "{{runtime_tag}} {{usage_type}}")], 0, y, 8, unit="percentunit"),
        panel("Runtime memory", [(f"sum by (runtime_tag, memory_location) (neuron_runtime_memory_used_bytes{{{INST}}})",
                                  "{{runtime_tag}} {{memory_location}}")], 8, y, 8, unit="bytes"),
        panel("Loaded models", [(f"sum by (runtime_tag, state) (neuron_runtime_loaded_models{{{INST}}})",
                                 "{{runtime_tag}} {{state}}")], 16, y, 8, unit="short"),
        panel("Device memory by category", [(f"sum by (category) (neuron_device_memory_used_bytes{{{INST},{DEV}}})",
                                             "{{category}}")], 0, y + 8, 12, unit="bytes"),
        panel("Core memory by category", [(f"sum by (__name__) ({{__name__=~\"neuroncore_memory_usage_.*\","
                                           f"{INST},{DEV}}})", "{{__name__}}")], 12, y + 8, 12, unit="bytes"),
    ]
    y += 16
    p.append(row("Hardware", y))
    y += 1
    p += [
        panel("ECC events", [(f"sum by (neuron_device_index, event_type) (increase(hardware_ecc_events_total{{{INST}}}[10m]))",
                              "device {{neuron_device_index}} {{event_type}}")], 0, y, 12, unit="short"),
        panel("Repaired HBM errors", [(f"sum by (neuron_device_index) "
                                       f"(increase(neuron_device_ecc_repairable_uncorrected_total{{{INST}}}[10m]))",
                                       "device {{neuron_device_index}}")], 12, y, 12, unit="short"),
    ]
    y += 8
    p.append(row("neuron-monitor health", y))
    y += 1
    p += [
        panel("Report age", [(f"max by (instance_id) (neuron_monitor_report_age_seconds{{{INST}}})",
                              "{{instance_id}}")], 0, y, 6, unit="s"),
        panel("Collection duration", [(f"max by (group) (neuron_monitor_collection_duration_seconds{{{INST}}})",
                                       "{{group}}")], 6, y, 6, unit="s"),
        panel("Groups with errors", [(f"sum by (group) (neuron_monitor_group_errors{{{INST}}})", "{{group}}")],
              12, y, 6, unit="short"),
        panel("Exporter drops and failures",
              [(f"sum by (exporter) (increase(neuron_monitor_exporter_dropped_total{{{INST}}}[10m]))", "{{exporter}} dropped"),
               (f"sum by (exporter) (increase(neuron_monitor_exporter_failures_total{{{INST}}}[10m]))",
                "{{exporter}} failed")], 18, y, 6, unit="short"),
    ]
    for i, item in enumerate(p):
        item["id"] = i + 1
    return {
        "title": "Neuron monitor",
        "uid": "neuron-monitor",
        "description": "AWS Neuron devices and applications, from neuron-monitor",
        "tags": ["neuron", "trainium", "inferentia"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"},
            {"name": "instance", "type": "query", "label": "Instance", "multi": True, "includeAll": True,
             "allValue": ".*", "datasource": {"type": "prometheus", "uid": "${datasource}"},
             "query": {"query": "label_values(instance_info, instance_id)", "refId": "instance"},
             "definition": "label_values(instance_info, instance_id)", "refresh": 2},
            {"name": "device", "type": "query", "label": "Neuron device", "multi": True, "includeAll": True,
             "allValue": ".*", "datasource": {"type": "prometheus", "uid": "${datasource}"},
             "query": {"query": "label_values(neuroncore_utilization_ratio{instance_id=~\"$instance\"}, neuron_device)",
                       "refId": "device"},
             "definition": "label_values(neuroncore_utilization_ratio{instance_id=~\"$instance\"}, neuron_device)",
             "refresh": 2},
        ]},
        "panels": p,
    }


if __name__ == "__main__":
    print(json.dumps(dashboard(), indent=2))
