"""examples/grafana-dashboard.json queries only metrics the daemon exports, and the metrics
table of docs/metrics.md names every one of them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gpuci_tui.core.host.metrics.registry import Metrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "examples" / "grafana-dashboard.json"
NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported() -> dict[str, str]:
    """Every series name the registry exports → its family (histograms and counters by suffix)."""
    names: dict[str, str] = {}
    for family in Metrics().registry.collect():
        for suffix in SUFFIXES[family.type]:
            names[family.name + suffix] = family.name
    return names


def queries(node: Any) -> list[str]:
    """Every PromQL text in the dashboard: panel targets' ``expr`` and variables' ``query``."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "query") and isinstance(value, str):
                found.append(value)
            else:
                found.extend(queries(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(queries(item))
    return found


def test_every_metric_the_dashboard_queries_is_exported() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = queries(dashboard)
    assert len(exprs) >= 15
    used = {name for expr in exprs for name in NAME.findall(expr) if name.startswith("gpuci_")}
    assert used, "no metric found: the name pattern is broken"
    assert sorted(used - exported().keys()) == []
    # Each panel has at least one query, all of them against the chosen data source.
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}"


def test_the_dashboard_shows_every_metric_family() -> None:
    used = {
        exported()[name]
        for expr in queries(json.loads(DASHBOARD.read_text()))
        for name in NAME.findall(expr)
        if name in exported()
    }
    assert sorted({*exported().values()} - used) == []


def test_the_metrics_guide_documents_every_metric() -> None:
    readme = (ROOT / "docs" / "metrics.md").read_text()
    section = readme[readme.index("## Prometheus metrics") :]
    documented = set(re.findall(r"^\| `(gpuci_[a-z_]+)`", section, re.MULTILINE))
    # As a query names them: counters with _total, histograms and gauges by family name.
    wanted = {
        family.name + ("_total" if family.type == "counter" else "")
        for family in Metrics().registry.collect()
    }
    assert sorted(wanted ^ documented) == []
    assert "examples/grafana-dashboard.json" in readme


def test_startup_gap_and_queue_wait_have_p50_and_p95_panels() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    for family in (
        "gpuci_slot_startup_seconds",
        "gpuci_slot_job_gap_seconds",
        "gpuci_job_queue_wait_seconds",
    ):
        panel = next(p for p in dashboard["panels"] if family in json.dumps(p["targets"]))
        quantiles = sorted(
            re.findall(r"histogram_quantile\((0\.\d+),", t["expr"])[0] for t in panel["targets"]
        )
        assert quantiles == ["0.5", "0.95"], panel["title"]
        assert all(f"{family}_bucket" in t["expr"] for t in panel["targets"])
        assert panel["fieldConfig"]["defaults"]["unit"] == "s"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
