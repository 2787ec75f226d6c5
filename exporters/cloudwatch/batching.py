"""PutMetricData batching within the service's limits.

Several samples of one metric (same name, dimensions, unit) in one time bucket become one
datum: `Values`/`Counts` while there are at most 150 distinct values, a `StatisticValues`
set beyond that.  Datums are then cut into requests of at most 1,000 datums and about
1 MB of payload (the documented PutMetricData limits; the dimension limit, 30, is read
from the botocore model when boto3 is loaded).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Iterator
from typing import Any

from exporters.cloudwatch.metrics import Datum

MAX_DATUMS_PER_REQUEST = 1000
MAX_VALUES_PER_DATUM = 150
MAX_PAYLOAD_BYTES = 1_000_000
PAYLOAD_MARGIN = 0.8  # our size estimate is rough: stay well under the limit
MAX_DIMENSIONS = 30


def aggregate(datums: Iterable[Datum], resolution: int) -> list[dict[str, Any]]:
    """Merge samples per (metric, dimensions, unit, time bucket) into MetricDatum dicts."""
    buckets: dict[tuple[str, tuple[tuple[str, str], ...], str, int], dict[float, int]] = {}
    for d in datums:
        key = (d.name, d.dimensions[:MAX_DIMENSIONS], d.unit, int(d.timestamp // resolution))
        counts = buckets.setdefault(key, {})
        counts[d.value] = counts.get(d.value, 0) + 1
    out = []
    for (name, dims, unit, bucket), counts in buckets.items():
        datum: dict[str, Any] = {
            "MetricName": name,
            "Dimensions": [{"Name": k, "Value": v} for k, v in dims],
            "Timestamp": datetime.datetime.fromtimestamp(bucket * resolution, datetime.UTC),
            "Unit": unit,
            "StorageResolution": 1 if resolution == 1 else 60,
        }
        if len(counts) <= MAX_VALUES_PER_DATUM:
            datum["Values"] = list(counts)
            datum["Counts"] = [float(c) for c in counts.values()]
        else:
            values = list(counts)
            datum["StatisticValues"] = {
                "SampleCount": float(sum(counts.values())),
                "Sum": sum(v * c for v, c in counts.items()),
                "Minimum": min(values),
                "Maximum": max(values),
            }
        out.append(datum)
    return out


def estimated_size(datum: dict[str, Any]) -> int:
    size = 80 + len(datum["MetricName"]) + len(datum["Unit"])
    size += sum(20 + len(d["Name"]) + len(d["Value"]) for d in datum["Dimensions"])
    size += 2 * 12 * len(datum.get("Values", ()))
    return size + (60 if "StatisticValues" in datum else 0)


def requests(datums: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Cut aggregated datums into PutMetricData-sized lists."""
    batch: list[dict[str, Any]] = []
    size = 0
    budget = int(MAX_PAYLOAD_BYTES * PAYLOAD_MARGIN)
    for datum in datums:
        cost = estimated_size(datum)
        if batch and (len(batch) >= MAX_DATUMS_PER_REQUEST or size + cost > budget):
            yield batch
            batch, size = [], 0
        batch.append(datum)
        size += cost
    if batch:
        yield batch
