"""The header names an Entra identity and its token's state; a PAT reads as before."""

from __future__ import annotations

from gpuci_tui.core.models import HealthSnapshot, HealthState
from gpuci_tui.widgets.status_bar import azure_health

WHO = "service principal gpuci-lab · token valid 52 min"


def test_an_entra_identity_is_named_with_its_token_state() -> None:
    ok = HealthSnapshot(HealthState.OK, "", 100.0, identity=WHO)
    assert azure_health(ok, 160.0).plain == f"✓ {WHO} · checked 60 s ago"
    refused = HealthSnapshot(HealthState.AUTH_FAILED, "x", 100.0, identity=WHO)
    assert azure_health(refused, 100.0).plain.startswith("✗ service principal gpuci-lab refused")


def test_a_pat_reads_as_before() -> None:
    assert azure_health(HealthSnapshot(HealthState.OK, "", 100.0), 100.0).plain.startswith(
        "✓ PAT valid"
    )
    assert azure_health(HealthSnapshot(HealthState.AUTH_FAILED), 100.0).plain == "✗ PAT rejected"


def test_a_refused_pool_role_is_said_as_such_not_as_a_rejection() -> None:
    reason = "the service principal gpuci-lab is not an Administrator of pool gpu: add it in …"
    role = HealthSnapshot(HealthState.AUTH_FAILED, reason, 100.0, identity=WHO, pool_role=reason)
    text = azure_health(role, 100.0).plain
    assert text.startswith("✗ service principal gpuci-lab is not the pool's Administrator; agents")
    assert "refused" not in text and "rejected" not in text
    pat = HealthSnapshot(HealthState.AUTH_FAILED, reason, 100.0, pool_role=reason)
    assert azure_health(pat, 100.0, short=True).plain.startswith(
        "✗ PAT not pool Administrator; agents wait"
    )
