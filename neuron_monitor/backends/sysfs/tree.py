"""Discovery of the driver's device tree: which devices and cores exist, what they are.

Discovery lists folders and reads the architecture files; it runs at start-up and again
whenever the set of device folders changes (a device reset or driver reload), never on
every collection.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from neuron_monitor.backends.base import REPORTED_CORE_MEMORY, REPORTED_HOST_MEMORY, HardwareReading
from neuron_monitor.catalogue import architecture_for_arch_strings

DEVICE_DIR = os.path.join("devices", "virtual", "neuron_device")
CLASS_DIR = os.path.join("class", "neuron_device")
_DEVICE_NAME = re.compile(r"neuron(\d+)")
_CORE_NAME = re.compile(r"neuron_core(\d+)")
MAX_DEVICES = 64


@dataclass(frozen=True, slots=True)
class CoreLayout:
    core: int  # global physical index
    device: int
    path: str
    status_names: tuple[str, ...]
    memory_categories: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeviceLayout:
    device: int
    path: str
    cores: tuple[CoreLayout, ...]
    hardware_stats: tuple[str, ...]  # files present under stats/hardware
    host_categories: tuple[str, ...]


def device_root(sysfs_root: str) -> str | None:
    """The folder holding neuron<N> (the virtual-devices path, or the class path)."""
    for rel in (DEVICE_DIR, CLASS_DIR):
        path = os.path.join(sysfs_root, rel)
        if os.path.isdir(path):
            return path
    return None


def list_devices(root: str) -> list[tuple[int, str]]:
    try:
        names = os.listdir(root)
    except OSError:
        return []
    found = []
    for name in names:
        match = _DEVICE_NAME.fullmatch(name)
        if match and int(match.group(1)) < MAX_DEVICES:
            found.append((int(match.group(1)), os.path.join(root, name)))
    return sorted(found)


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read(256).strip()


def _subdirs(path: str) -> tuple[str, ...]:
    try:
        return tuple(sorted(e.name for e in os.scandir(path) if e.is_dir()))
    except OSError:
        return ()


def _entries(path: str) -> tuple[str, ...]:
    try:
        return tuple(sorted(os.listdir(path)))
    except OSError:
        return ()


def discover(sysfs_root: str) -> tuple[list[DeviceLayout], HardwareReading]:
    root = device_root(sysfs_root)
    if root is None:
        return [], HardwareReading("", "", 0, 0, 0, None, error=f"no Neuron devices under {sysfs_root} "
                                   f"(is the Neuron driver loaded?)")
    devices: list[DeviceLayout] = []
    errors: list[str] = []
    arch_strings: tuple[str, str, str] | None = None
    cores_per_device = 0
    for index, path in list_devices(root):
        core_dirs = sorted((int(m.group(1)), name) for name in _subdirs(path) if (m := _CORE_NAME.fullmatch(name)))
        try:
            count = int(_read(os.path.join(path, "core_count")) or 0)
        except (OSError, ValueError) as exc:
            errors.append(f"neuron{index}/core_count: {exc}")
            count = len(core_dirs)
        cores_per_device = max(cores_per_device, count, len(core_dirs))
        if arch_strings is None:
            try:
                device_arch = _read(os.path.join(path, "info", "architecture", "arch_type"))
                instance = _read(os.path.join(path, "info", "architecture", "instance_type"))
                core_arch = _read(os.path.join(path, core_dirs[0][1], "info", "architecture", "arch_type")) \
                    if core_dirs else ""
                arch_strings = (device_arch, core_arch, instance)
            except OSError as exc:
                errors.append(f"neuron{index}: architecture unreadable: {exc.strerror}")
        devices.append(DeviceLayout(
            device=index,
            path=path,
            cores=(),  # filled below, once the cores-per-device count is known
            hardware_stats=_entries(os.path.join(path, "stats", "hardware")),
            host_categories=tuple(c for c in _subdirs(os.path.join(path, "stats", "memory_usage", "host_mem"))
                                  if c in REPORTED_HOST_MEMORY),
        ))
    laid_out = []
    for dev in devices:
        cores = []
        for local, name in sorted((int(m.group(1)), n) for n in _subdirs(dev.path)
                                  if (m := _CORE_NAME.fullmatch(n))):
            core_path = os.path.join(dev.path, name)
            cores.append(CoreLayout(
                core=dev.device * cores_per_device + local,
                device=dev.device,
                path=core_path,
                status_names=_subdirs(os.path.join(core_path, "stats", "status")),
                memory_categories=tuple(c for c in _subdirs(os.path.join(core_path, "stats", "memory_usage",
                                                                           "device_mem"))
                                        if c in REPORTED_CORE_MEMORY),
            ))
        laid_out.append(DeviceLayout(dev.device, dev.path, tuple(cores), dev.hardware_stats, dev.host_categories))
    return laid_out, _hardware(laid_out, arch_strings, cores_per_device, errors)


def _hardware(devices: list[DeviceLayout], arch_strings: tuple[str, str, str] | None, cores_per_device: int,
              errors: list[str]) -> HardwareReading:
    if not devices:
        return HardwareReading("", "", 0, 0, 0, None, error="the Neuron driver reports no devices")
    arch = architecture_for_arch_strings(arch_strings[0], arch_strings[1]) if arch_strings else None
    if arch is None:
        errors.append(f"unknown architecture {arch_strings[:2] if arch_strings else None}")
        return HardwareReading("", "", len(devices), 0, cores_per_device, None,
                               device_indices=tuple(d.device for d in devices), error="; ".join(errors))
    lnc = arch.default_logical_core_config
    return HardwareReading(
        device_type=arch.neuron_device_type,
        core_version="v3d" if lnc else arch.neuroncore_version,
        device_count=len(devices),
        device_memory_size=arch.device_memory_size,
        physical_cores_per_device=cores_per_device,
        logical_core_config=lnc,
        instance_type=arch_strings[2] if arch_strings else "",
        device_indices=tuple(d.device for d in devices),
        error="; ".join(errors),
    )
