"""Shared test set-up.

Tests never talk to the real EC2 metadata address: the daemon's metadata look-up is
switched off for every process the tests start (they inherit this environment); the
IMDS client itself is tested against a loopback server.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


def monitor_command(*args: str) -> list[str]:
    """The real CLI, run from this checkout (works in a git worktree too)."""
    return [sys.executable, "-m", "neuron_monitor", *args]


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env
