"""`neuron_hw_counters`: ECC events per device in the period."""

from __future__ import annotations

from neuron_monitor.backends.base import DeviceReading, Need, Snapshot
from neuron_monitor.collectors.base import SystemCollector, missing_part
from neuron_monitor.counters import counter_delta
from neuron_monitor.report import DeviceEcc, MetricGroup, NeuronHwCounters

_FIELDS = ("mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_corrected", "sram_ecc_uncorrected",
           "mem_ecc_repairable_uncorrected")


class HwCountersCollector(SystemCollector):
    group = "neuron_hw_counters"
    needs = frozenset({Need.DEVICES})

    def __init__(self) -> None:
        self._previous: dict[int, DeviceReading] = {}

    def collect(self, snapshot: Snapshot, period: float) -> MetricGroup:
        if snapshot.devices is None:
            return NeuronHwCounters(period=period, error=missing_part(snapshot, Need.DEVICES, "devices"))
        devices: list[DeviceEcc] = []
        errors: list[str] = []
        for reading in snapshot.devices:
            if reading.error:
                errors.append(reading.error)
                continue
            prev = self._previous.get(reading.device)
            self._previous[reading.device] = reading
            counts = {
                f: 0 if prev is None else counter_delta(getattr(prev, f), getattr(reading, f), bits=32)
                for f in _FIELDS
            }
            devices.append(DeviceEcc(neuron_device_index=reading.device, **counts))
        live = {d.device for d in snapshot.devices}
        for gone in set(self._previous) - live:
            del self._previous[gone]
        return NeuronHwCounters(period=period, neuron_devices=devices, error="; ".join(errors))
