"""The Neuron driver's sysfs files as a device backend."""

from neuron_monitor.backends.sysfs.backend import SysfsBackend
from neuron_monitor.backends.sysfs.tree import device_root

__all__ = ["SysfsBackend", "device_root"]
