"""The Neuron instance catalogue (SPEC §6) and the driver's architecture strings (SPEC §5)."""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class Architecture:
    family: str  # inf1, trn1, inf2, trn2
    device_arch: str  # info/architecture/arch_type of the device
    core_arch: str  # neuron_core<K>/info/architecture/arch_type
    instance_type_tag: str  # info/architecture/instance_type
    device_name: str  # info/architecture/device_name
    neuron_device_type: str  # report's neuron_hardware_info.neuron_device_type
    neuroncore_version: str  # report's neuroncore_version (physical core)
    physical_cores_per_device: int
    device_memory_size: int
    default_logical_core_config: int | None  # trn2: 2 physical cores per logical core
    has_serial_number: bool
    has_hardware_stats: bool  # stats/hardware exists (not on inf1)


ARCHITECTURES: dict[str, Architecture] = {
    "inf1": Architecture("inf1", "NDv1", "NCv1", "Inf1", "Inferentia", "inferentia", "v1",
                         4, 8 * GIB, None, False, False),
    "trn1": Architecture("trn1", "NDv2", "NCv2", "Trn1", "Trainium1", "trainium", "v2",
                         2, 32 * GIB, None, True, True),
    "inf2": Architecture("inf2", "NDv3", "NCv2", "Inf2", "Inferentia2", "inferentia2", "v2",
                         2, 32 * GIB, None, True, True),
    "trn2": Architecture("trn2", "NDv3", "NCv3", "Trn2", "Trainium2", "trainium2", "v3",
                         8, 96 * GIB, 2, True, True),
}


@dataclass(frozen=True, slots=True)
class InstanceType:
    name: str
    family: str
    device_count: int
    vcpus: int
    host_memory_gib: int

    @property
    def architecture(self) -> Architecture:
        return ARCHITECTURES[self.family]


_TABLE: tuple[tuple[str, str, int, int, int], ...] = (
    ("inf1.xlarge", "inf1", 1, 4, 8),
    ("inf1.2xlarge", "inf1", 1, 8, 16),
    ("inf1.6xlarge", "inf1", 4, 24, 48),
    ("inf1.24xlarge", "inf1", 16, 96, 192),
    ("inf2.xlarge", "inf2", 1, 4, 16),
    ("inf2.8xlarge", "inf2", 1, 32, 128),
    ("inf2.24xlarge", "inf2", 6, 96, 384),
    ("inf2.48xlarge", "inf2", 12, 192, 768),
    ("trn1.2xlarge", "trn1", 1, 8, 32),
    ("trn1.32xlarge", "trn1", 16, 128, 512),
    ("trn1n.32xlarge", "trn1", 16, 128, 512),
    ("trn2.48xlarge", "trn2", 16, 192, 2048),
    ("trn2u.48xlarge", "trn2", 16, 192, 2048),
)

INSTANCE_TYPES: dict[str, InstanceType] = {
    name: InstanceType(name, family, devices, vcpus, mem) for name, family, devices, vcpus, mem in _TABLE
}


def instance_type(name: str) -> InstanceType:
    """Look up an instance type; KeyError names the valid ones."""
    try:
        return INSTANCE_TYPES[name]
    except KeyError:
        valid = ", ".join(INSTANCE_TYPES)
        raise KeyError(f"unknown instance type {name!r}; valid: {valid}") from None


def architecture_for_arch_strings(device_arch: str, core_arch: str) -> Architecture | None:
    """Map the driver's arch_type strings (device, core) to an architecture."""
    for arch in ARCHITECTURES.values():
        if arch.device_arch == device_arch and arch.core_arch == core_arch:
            return arch
    return None
