"""neuron-monitor: a monitoring daemon for AWS Neuron (Trainium / Inferentia) machines."""

__version__ = "0.1.0"
