#!/usr/bin/env bash
# Sets up everything neuron-monitor and its tests need, idempotently:
#   - Debian packages the tests and benchmarks use (a real Prometheus server and promtool, node exporter,
#     systemd-analyze, wrk)
#   - a virtualenv in .venv with the project (editable) and its dev dependencies.
# Usage: scripts/setup.sh [--runtime-only]
set -euo pipefail
cd "$(dirname "$0")/.."

runtime_only=0
[ "${1:-}" = "--runtime-only" ] && runtime_only=1

SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi

if [ "$runtime_only" = 0 ]; then
  need_apt=()
  command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
  command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
  [ -x /usr/bin/prometheus-node-exporter ] || need_apt+=(prometheus-node-exporter)
  command -v systemd-analyze >/dev/null 2>&1 || need_apt+=(systemd)
  command -v wrk >/dev/null 2>&1 || need_apt+=(wrk)  # the benchmark harness's scrape load
  if [ "${#need_apt[@]}" -gt 0 ]; then
    echo "setup: installing Debian packages: ${need_apt[*]}" >&2
    $SUDO apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need_apt[@]}" >&2
  fi
  # The Debian packages start their own services on some machines; the tests run their own.
  $SUDO systemctl disable --now prometheus prometheus-node-exporter >/dev/null 2>&1 || true
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)-$runtime_only
if [ ! -f "$stamp" ]; then
  .venv/bin/pip install -q --upgrade pip >&2
  if [ "$runtime_only" = 1 ]; then
    .venv/bin/pip install -q -e . >&2
  else
    .venv/bin/pip install -q -e ".[dev]" >&2
  fi
  touch "$stamp"
fi
