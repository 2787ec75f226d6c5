#!/usr/bin/env bash
# Sets up and runs neuron-monitor on an emulated trn2.48xlarge, every metric group every second.
# Extra arguments go to neuron-monitor (e.g. --emulate trn1.32xlarge).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --runtime-only
exec .venv/bin/neuron-monitor --emulate trn2.48xlarge -c configs/all-groups-1s.json "$@"
