"""``gpuci_image_pulls_total{result}``: the image puller's ended pulls, from its events."""

from __future__ import annotations

from gpuci_tui.core.host.metrics.registry import Metrics
from gpuci_tui.core.models import SupervisorEvent
from tests.core.host.test_metrics import value


def test_pulls_are_counted_by_result_from_zero() -> None:
    metrics = Metrics()
    assert value(metrics, "gpuci_image_pulls_total", result="ok") == 0
    assert value(metrics, "gpuci_image_pulls_total", result="failed") == 0
    for at, kind in enumerate(("pull_started", "pull_done", "pull_started", "pull_failed")):
        metrics.observe_event(SupervisorEvent(at=float(at), kind=kind, message="m"))
    metrics.observe_event(SupervisorEvent(at=9.0, kind="pull_check_failed", message="m"))
    assert value(metrics, "gpuci_image_pulls_total", result="ok") == 1
    assert value(metrics, "gpuci_image_pulls_total", result="failed") == 1
