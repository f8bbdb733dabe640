"""A PAT's known expiry ([azure] pat_expires): warned days before, named when it is rejected."""

from __future__ import annotations

import pytest

from gpuci_tui.core.models import HealthSnapshot, HealthState
from gpuci_tui.core.secrets.credentials import PatCredential, renewal_due
from gpuci_tui.core.secrets.entra_msal import pat_expiry
from gpuci_tui.widgets.status_bar import azure_health

EXPIRES = pat_expiry("2027-03-31")  # the end of that day, UTC
DAY = 86400.0


def test_the_date_is_the_end_of_that_day_utc() -> None:
    assert EXPIRES == 1806537600.0  # 2027-04-01T00:00:00Z
    assert pat_expiry("") is None


@pytest.mark.parametrize(
    ("days_left", "words"),
    [
        (30, "PAT"),
        (14, "PAT · expires in 14 days (2027-03-31): renew it"),
        (1.5, "PAT · expires in 1 day (2027-03-31): renew it"),
        (0.5, "PAT · expires today (2027-03-31): renew it"),
        (-1, "PAT · expired on 2027-03-31: renew it"),
    ],
)
def test_describe_warns_from_two_weeks_before(days_left: float, words: str) -> None:
    assert EXPIRES is not None
    cred = PatCredential(
        "abcdefghij0123456789", expires_on=EXPIRES, clock=lambda: EXPIRES - days_left * DAY
    )
    assert cred.describe() == words
    assert renewal_due(cred) == EXPIRES


def test_a_rejection_after_the_date_says_expired_with_the_fix() -> None:
    assert EXPIRES is not None
    before = PatCredential("abcdefghij0123456789", expires_on=EXPIRES, clock=lambda: EXPIRES - 60)
    after = PatCredential("abcdefghij0123456789", expires_on=EXPIRES, clock=lambda: EXPIRES + 60)
    assert "wrong, expired or revoked" in before.rejected_message()
    message = after.rejected_message()
    assert "it expired on 2027-03-31 (or was revoked)" in message
    assert "gpuci-tui token set" in message and "pat_expires" in message


def test_the_header_warns_in_yellow() -> None:
    words = "PAT · expires in 3 days (2027-03-31): renew it"
    text = azure_health(HealthSnapshot(HealthState.OK, "", 100.0, identity=words), 100.0)
    assert text.plain.startswith(f"⚠ {words}")
    assert "yellow" in str(text.style)
    assert azure_health(HealthSnapshot(HealthState.AUTH_FAILED, identity=words), 1.0).plain == (
        "✗ PAT rejected"
    )
