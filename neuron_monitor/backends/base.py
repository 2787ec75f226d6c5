"""The device backend protocol: what the devices and the Neuron applications look like now.

A backend knows nothing of metric groups or JSON.  The scheduler asks it for one
`Snapshot` per collection cycle, naming which parts it needs (`Need`); collectors are
pure functions of snapshots.  All counters in a snapshot are *cumulative* (as the
driver's `total` files are): collectors turn them into per-period figures, treating a
drop as a reset.

Core indices: `CoreReading.core` is the global *physical* core index
(device * physical_cores_per_device + k).  Applications name the *logical* cores they
use (`AppReading.cores`); on every instance type but trn2 a logical core is a physical
core; on trn2 with `logical_neuroncore_config = 2`, logical core L covers physical
cores 2L and 2L+1.  `HardwareReading.physical_cores_of(L)` gives the mapping.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Protocol, runtime_checkable


class Need(enum.Enum):
    """The parts of a snapshot a collector reads; the backend reads only what is asked."""

    CORES = "cores"  # per-core busy time, flops, status counters
    CORE_MEMORY = "core_memory"  # per-core device memory by category
    DEVICES = "devices"  # per-device ECC counters and host memory
    APPLICATIONS = "applications"  # pid, tag, cores, error
    APP_CPU = "app_cpu"  # cumulative CPU seconds per application
    APP_MEMORY = "app_memory"  # host memory breakdown and loaded models per application
    APP_LATENCY = "app_latency"  # recent execution latency samples per application


# Device-memory categories, in the driver's names (stats/memory_usage/device_mem/<cat>).
DEVICE_MEMORY_CATEGORIES: tuple[str, ...] = (
    "model_code",
    "tensors",
    "constants",
    "model_shared_scratchpad",
    "runtime_memory",
    "driver_memory",
    "collectives",
    "nonshared_scratchpad",
    "notifications",
    "dma_rings",
    "uncategorized",
)
# The device-memory categories the report has (`neuroncore_memory_usage`); backends read
# only these: the driver's other categories have no place in the report.
REPORTED_CORE_MEMORY: tuple[str, ...] = (
    "constants",
    "model_code",
    "model_shared_scratchpad",
    "runtime_memory",
    "tensors",
)
# Host-memory categories (stats/memory_usage/host_mem/<cat>), per device.
HOST_MEMORY_CATEGORIES: tuple[str, ...] = (
    "application_memory",
    "constants",
    "dma_buffers",
    "tensors",
    "driver_memory",
    "notifications",
    "dma_rings",
    "uncategorized",
)


# The host-memory categories the report has (`usage_breakdown.host`); likewise the only
# ones read.
REPORTED_HOST_MEMORY: tuple[str, ...] = ("application_memory", "constants", "dma_buffers", "tensors")


@dataclass(frozen=True, slots=True)
class HardwareReading:
    """Static facts about the devices (read once, re-read when devices change)."""

    device_type: str  # "inferentia", "trainium", "inferentia2", "trainium2"
    core_version: str  # "v1", "v2", "v3d" (trn2 with logical cores) or "v3"
    device_count: int
    device_memory_size: int  # bytes per device
    physical_cores_per_device: int
    logical_core_config: int | None  # trn2 only: physical cores per logical core
    instance_type: str = ""  # e.g. "trn2.48xlarge" when known
    device_indices: tuple[int, ...] = ()  # the devices present (may have gaps)
    error: str = ""

    @property
    def logical_cores_per_device(self) -> int:
        lnc = self.logical_core_config or 1
        return max(1, self.physical_cores_per_device // lnc)

    def physical_cores_of(self, logical_core: int) -> tuple[int, ...]:
        lnc = self.logical_core_config or 1
        first = logical_core * lnc
        return tuple(range(first, first + lnc))

    def device_of_logical(self, logical_core: int) -> int:
        return logical_core // self.logical_cores_per_device


class CounterSet(Mapping[str, int]):
    """Named counters kept as one tuple of values, with the tuple of names shared.

    Every core of a device reports the same counters (the driver's folder listing), so
    the sysfs backend builds one names tuple per layout and each reading is just a tuple
    of counts (`counts`): two readings of a core are subtracted as whole vectors (`map` in C) instead of
    name by name.  For everything else it is a read-only Mapping, equal to the dict with
    the same items.
    """

    __slots__ = ("counts", "names")
    # name -> position, per names tuple; there are only a few distinct tuples (one per
    # driver version's counter listing), bounded anyway in case callers make many.
    _positions: ClassVar[dict[tuple[str, ...], dict[str, int]]] = {}
    _MAX_LAYOUTS: ClassVar[int] = 256

    def __init__(self, names: tuple[str, ...], values: tuple[int, ...]) -> None:
        if len(names) != len(values):
            raise ValueError(f"{len(names)} names for {len(values)} values")
        self.names = names
        self.counts = values

    @classmethod
    def of(cls, counters: Mapping[str, int]) -> CounterSet:
        if isinstance(counters, CounterSet):
            return counters
        return cls(tuple(counters), tuple(counters.values()))

    def _position(self) -> dict[str, int]:
        positions = self._positions.get(self.names)
        if positions is None:
            if len(self._positions) >= self._MAX_LAYOUTS:
                self._positions.clear()
            positions = self._positions[self.names] = {n: i for i, n in enumerate(self.names)}
        return positions

    def __getitem__(self, name: str) -> int:
        return self.counts[self._position()[name]]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __repr__(self) -> str:
        return f"CounterSet({dict(zip(self.names, self.counts, strict=True))!r})"


EMPTY_COUNTERS = CounterSet((), ())


@dataclass(frozen=True, slots=True)
class CoreReading:
    """Cumulative counters of one physical NeuronCore."""

    core: int  # global physical index
    device: int
    busy_us: int  # nc_time_in_use total, microseconds
    flops: int  # flop_count total
    status: Mapping[str, int]  # driver status counter name -> total
    # REPORTED_CORE_MEMORY category -> present bytes (the other categories are not read)
    device_memory: Mapping[str, int] = field(default_factory=dict)
    error: str = ""  # non-empty when some file of this core could not be read


@dataclass(frozen=True, slots=True)
class DeviceReading:
    """Cumulative ECC counters and host memory of one device."""

    device: int
    mem_ecc_corrected: int = 0
    mem_ecc_uncorrected: int = 0
    sram_ecc_corrected: int = 0
    sram_ecc_uncorrected: int = 0
    mem_ecc_repairable_uncorrected: int = 0
    # REPORTED_HOST_MEMORY category -> present bytes (the other categories are not read)
    host_memory: Mapping[str, int] = field(default_factory=dict)
    error: str = ""


@dataclass(frozen=True, slots=True)
class SubgraphReading:
    name: str
    core: int  # logical core index
    device: int
    host: Mapping[str, int]  # application_memory, constants, dma_buffers, tensors
    device_memory: Mapping[str, int]  # constants, model_code, runtime_memory, tensors


@dataclass(frozen=True, slots=True)
class ModelReading:
    name: str
    uuid: str
    model_id: int
    is_running: bool
    subgraphs: tuple[SubgraphReading, ...]


@dataclass(frozen=True, slots=True)
class LatencyWindow:
    """The most recent execution latencies of an application.

    `end_seq` counts every sample ever recorded; `total`/`device` hold the last
    `len(total)` of them (a bounded window).  A consumer remembers the `end_seq` it saw
    and takes the samples recorded since, so several consumers can read one window.
    """

    end_seq: int
    total: tuple[float, ...]
    device: tuple[float, ...]

    def since(self, seq: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
        fresh = max(0, min(self.end_seq - seq, len(self.total)))
        if fresh == 0:
            return (), ()
        return self.total[-fresh:], self.device[-fresh:]


@dataclass(frozen=True, slots=True)
class AppReading:
    """One Neuron application (a process using Neuron devices)."""

    pid: int
    tag: str
    cores: tuple[int, ...]  # logical core indices it uses
    error: str = ""  # e.g. the process could not be inspected
    cpu_user_s: float | None = None  # cumulative CPU seconds (APP_CPU)
    cpu_system_s: float | None = None
    host_memory: Mapping[str, int] | None = None  # application_memory/constants/dma_buffers/tensors
    models: tuple[ModelReading, ...] | None = None  # None: the backend cannot know
    latency: LatencyWindow | None = None  # None: the backend has no latency source


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one collection cycle read; parts not asked for are None."""

    taken_at: float  # monotonic seconds
    hardware: HardwareReading
    cores: Mapping[int, CoreReading] | None = None
    devices: Sequence[DeviceReading] | None = None
    applications: Sequence[AppReading] | None = None
    errors: Mapping[Need, str] = field(default_factory=dict)  # a part that failed as a whole


@runtime_checkable
class DeviceBackend(Protocol):
    """Implemented by the emulated and the sysfs backends."""

    name: str

    def hardware(self) -> HardwareReading:
        """Static device facts; cheap (cached by the backend)."""
        ...

    def snapshot(self, needs: frozenset[Need], now: float) -> Snapshot:
        """Read the asked-for parts.  Blocking; the scheduler calls it off the event loop.

        Must not raise for a bad file or a vanished device/process: such failures go into
        the reading's `error` or `Snapshot.errors`.
        """
        ...

    def close(self) -> None:
        """Release open files, child processes, etc."""
        ...


class BackendUnavailable(Exception):
    """The asked-for backend cannot run here (e.g. no Neuron driver)."""
