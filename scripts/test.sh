#!/usr/bin/env bash
# Sets up and runs every check: ruff, mypy --strict, and the whole pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "== ruff" >&2
.venv/bin/ruff check neuron_monitor exporters tests benchmarks
echo "== mypy --strict" >&2
.venv/bin/mypy
echo "== pytest" >&2
.venv/bin/python -m pytest "$@"
