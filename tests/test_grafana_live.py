"""Every panel query of the dashboard, evaluated by a real Prometheus scraping the daemon on
emulated devices: each must parse and return data."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.daemon_process import ALL_1S, running_daemon
from tests.prometheus_server import PrometheusServer

REPO = Path(__file__).resolve().parent.parent


def panel_queries() -> list[tuple[str, str]]:
    board = json.loads((REPO / "grafana" / "neuron-monitor.json").read_text())
    out = []
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            out.append((panel["title"], target["expr"]))
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            out.append((f"variable {variable['name']}", variable["definition"]))
    return out


def substitute(expr: str) -> str:
    return expr.replace("$instance", ".*").replace("$device", ".*")


def test_every_panel_query_returns_data(tmp_path: Path) -> None:
    queries = panel_queries()
    assert len(queries) >= 30
    with running_daemon("--emulate", "trn2.48xlarge", "-c", ALL_1S) as (_, port), \
            PrometheusServer(tmp_path, [f"127.0.0.1:{port}"]) as prom:
        prom.wait_for("count_over_time(up[20s]) >= 8", timeout=60)  # rates and increases need history
        empty = []
        for title, expr in queries:
            if expr.startswith("label_values("):
                metric, label = expr[len("label_values("):-1].rsplit(",", 1)
                values = prom.api("series", **{"match[]": substitute(metric.strip())})
                if not any(label.strip() in s for s in values):
                    empty.append((title, expr))
                continue
            deadline = time.monotonic() + 10
            while not prom.query(substitute(expr)):  # the query parsed (api() asserts success)
                if time.monotonic() > deadline:
                    empty.append((title, expr))
                    break
                time.sleep(1)
        assert not empty, empty
