"""The pool observer names the client's identity in the Azure health, warns once about a
PAT near its expiry, and Prometheus carries the PAT's expiry."""

from __future__ import annotations

from typing import Any

from gpuci_tui.core.host.metrics.registry import Metrics
from gpuci_tui.core.host.observers.pool import PoolObserver
from gpuci_tui.core.models import HealthSnapshot, HealthState, SlotState
from gpuci_tui.core.secrets.credentials import PatCredential
from tests.core.host.test_metrics import slot, snapshot, value

EXPIRES = 2_000_000_000.0


class Api:
    def __init__(self, credential: Any) -> None:
        self.credential = credential


def observer(credential: Any, events: list[tuple[str, str]]) -> PoolObserver:
    return PoolObserver(
        Api(credential),  # type: ignore[arg-type]
        "gpu",
        clock=lambda: EXPIRES - 3 * 86400,
        interval=1.0,
        report=lambda kind, text: events.append((kind, text)),
    )


def test_a_pat_near_its_expiry_is_named_and_reported_once() -> None:
    events: list[tuple[str, str]] = []
    pat = PatCredential(
        "abcdefghij0123456789", expires_on=EXPIRES, clock=lambda: EXPIRES - 3 * 86400
    )
    obs = observer(pat, events)
    obs.answered()
    obs.answered()
    assert obs.health.identity.startswith("PAT · expires in 3 days")
    assert obs.health.pat_expires_at == EXPIRES
    assert [kind for kind, _ in events] == ["pat_expiring"]


def test_a_plain_pat_and_a_fake_client_say_nothing() -> None:
    events: list[tuple[str, str]] = []
    obs = observer(PatCredential("abcdefghij0123456789"), events)
    obs.answered()
    assert (obs.health.identity, obs.health.pat_expires_at, events) == ("", None, [])
    fake = observer(None, events)
    fake.answered()
    assert fake.health.identity == ""


def test_prometheus_carries_the_pat_expiry() -> None:
    metrics = Metrics()
    health = HealthSnapshot(HealthState.OK, pat_expires_at=EXPIRES)
    metrics.observe_snapshot(snapshot([slot(1, SlotState.IDLE)], azure=health))
    assert value(metrics, "gpuci_pat_expiry_timestamp_seconds") == EXPIRES
    metrics.observe_snapshot(snapshot([slot(1, SlotState.IDLE)]))
    assert value(metrics, "gpuci_pat_expiry_timestamp_seconds") is None
