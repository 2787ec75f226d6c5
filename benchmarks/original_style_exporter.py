"""A baseline written the way the original companion exporter works: prometheus_client
Gauge/Counter objects whose label sets are updated from each report, exposition generated
on every scrape.  Used only by the benchmark, for a side-by-side comparison.

    python -m benchmarks.original_style_exporter PORT REPORT_FILE
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

INSTANCE = ["instance_name", "instance_id", "instance_type", "availability_zone", "region", "subnet_id"]


def main() -> None:
    port, path = int(sys.argv[1]), sys.argv[2]
    report: dict[str, Any] = json.loads(open(path, encoding="utf-8").read())  # noqa: SIM115
    registry = CollectorRegistry()
    rt = [*INSTANCE, "runtime_tag"]
    util = Gauge("neuroncore_utilization_ratio", "util", [*rt, "neuroncore"], registry=registry)
    vcpu = Gauge("neuron_runtime_vcpu_usage_ratio", "vcpu", [*rt, "usage_type"], registry=registry)
    mem = Gauge("neuron_runtime_memory_used_bytes", "mem", [*rt, "memory_location"], registry=registry)
    core_mem = {k: Gauge(f"neuroncore_memory_usage_{k}", k, [*rt, "memory_location", "neuroncore"], registry=registry)
                for k in ("constants", "model_code", "model_shared_scratchpad", "runtime_memory", "tensors")}
    errors = Counter("execution_errors", "errors", [*rt, "error_type"], registry=registry)
    status = Counter("execution_status", "status", [*rt, "status_type"], registry=registry)
    latency = Gauge("execution_latency_seconds", "latency", [*rt, "percentile"], registry=registry)
    ecc = Counter("hardware_ecc_events", "ecc", [*INSTANCE, "event_type", "neuron_device_index"], registry=registry)
    sys_mem = Gauge("system_memory_used_bytes", "mem", INSTANCE, registry=registry)
    start_http_server(port, addr="127.0.0.1", registry=registry)
    info = report["instance_info"]
    inst = [info["instance_name"], info["instance_id"], info["instance_type"], info["instance_availability_zone"],
            info["instance_region"], info["subnet_id"]]
    while True:
        for entry in report["neuron_runtime_data"]:
            labels = [*inst, entry["neuron_runtime_tag"]]
            groups = entry["report"]
            for core, usage in groups["neuroncore_counters"]["neuroncores_in_use"].items():
                util.labels(*labels, core).set(usage["neuroncore_utilization"] / 100)
            v = groups["neuron_runtime_vcpu_usage"]["vcpu_usage"]
            vcpu.labels(*labels, "user").set(v["user"] / 100)
            vcpu.labels(*labels, "system").set(v["system"] / 100)
            used = groups["memory_used"]["neuron_runtime_used_bytes"]
            mem.labels(*labels, "host").set(used["host"])
            mem.labels(*labels, "neuron_device").set(used["neuron_device"])
            for core, breakdown in used["usage_breakdown"]["neuroncore_memory_usage"].items():
                for kind, gauge in core_mem.items():
                    gauge.labels(*labels, "None", core).set(breakdown[kind])
            ex = groups["execution_stats"]
            for kind, count in ex["error_summary"].items():
                errors.labels(*labels, kind).inc(count)
            for kind, count in ex["execution_summary"].items():
                status.labels(*labels, kind).inc(count)
            for p, value in (ex["latency_stats"]["total_latency"] or {}).items():
                latency.labels(*labels, p).set(value)
        for dev in report["system_data"]["neuron_hw_counters"]["neuron_devices"]:
            for kind in ("mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_corrected", "sram_ecc_uncorrected"):
                ecc.labels(*inst, kind, str(dev["neuron_device_index"])).inc(dev[kind])
        sys_mem.labels(*inst).set(report["system_data"]["memory_info"]["memory_used_bytes"])
        time.sleep(1.0)


if __name__ == "__main__":
    main()
