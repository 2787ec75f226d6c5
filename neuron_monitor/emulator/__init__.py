"""`neuron-monitor-emulator`: the simulation played as a Neuron driver (sysfs files, device
nodes and real application processes), so the sysfs backend can be exercised end to end."""
