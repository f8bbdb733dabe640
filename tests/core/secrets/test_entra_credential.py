"""`EntraCredential` on a fake clock: when it signs in, what it says, how it fails."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from gpuci_tui.core.errors import AzureAuthError
from gpuci_tui.core.secrets.credentials import PatCredential, as_credential, header_secret
from gpuci_tui.core.secrets.entra import (
    EntraCredential,
    describe_aadsts,
    refresh_margin,
    token_claims,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Entra:
    """Answers sign-ins from a script: a token valid ``lifetime`` s, or a failure."""

    def __init__(self, lifetime: float = 3600.0) -> None:
        self.lifetime = lifetime
        self.calls = 0
        self.fail: Mapping[str, Any] | None = None

    def __call__(self) -> Mapping[str, Any]:
        self.calls += 1
        if self.fail is not None:
            return self.fail
        return {"access_token": f"eyJ0.eyJ{self.calls}.sig", "expires_in": self.lifetime}


def make(lifetime: float = 3600.0) -> tuple[EntraCredential, Entra, Clock]:
    clock, entra = Clock(), Entra(lifetime)
    cred = EntraCredential("service-principal", "1b2c", entra, clock=clock, margin=300)
    return cred, entra, clock


# (lifetime, seconds after the first sign-in, sign-ins so far): renewal starts at the
# smaller of 5 minutes and half the lifetime before expiry.
@pytest.mark.parametrize(
    ("lifetime", "after", "sign_ins"),
    [
        (90, 0, 1),
        (90, 44, 1),
        (90, 45, 2),  # half of 90 s: not at every call (5 min > its whole life)
        (90, 89, 2),
        (600, 299, 1),
        (600, 300, 2),  # 10 min: half its life and the 5-minute margin agree
        (3600, 0, 1),
        (3600, 60, 1),
        (3600, 3299, 1),
        (3600, 3300, 2),  # 1 h: 5 minutes before expiry
        (3600, 3500, 2),
        (3600, 7000, 2),
    ],
)
def test_renewal_starts_at_the_smaller_of_five_minutes_and_half_the_lifetime(
    lifetime: float, after: float, sign_ins: int
) -> None:
    cred, entra, clock = make(lifetime)
    start = clock.now
    cred.authorization()
    clock.now = start + after
    cred.authorization()
    assert entra.calls == sign_ins


@pytest.mark.parametrize(
    ("lifetime", "margin"), [(90, 45), (600, 300), (3600, 300), (4800, 300), (0, 0)]
)
def test_refresh_margin(lifetime: float, margin: float) -> None:
    assert refresh_margin(lifetime) == margin


def test_refresh_forces_a_new_sign_in_and_the_header_is_bearer() -> None:
    cred, entra, _ = make()
    first = cred.authorization()
    assert first.startswith("Bearer eyJ")
    assert cred.authorization() == first and entra.calls == 1
    cred.refresh()
    assert cred.authorization() != first and entra.calls == 2
    assert header_secret(first) == first.removeprefix("Bearer ")


def test_describe_counts_down_the_token() -> None:
    cred, _, clock = make()
    assert cred.describe() == "service principal 1b2c · not signed in yet"
    cred.authorization()
    assert cred.describe() == "service principal 1b2c · token valid 60 min"
    clock.now += 8 * 60 + 5
    assert cred.describe() == "service principal 1b2c · token valid 51 min"
    clock.now += 3600
    assert cred.describe() == "service principal 1b2c · token expired"


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (7000215, "the client secret is wrong"),
        (7000222, "the client secret has expired"),
        (700016, "no application with this client id"),
        (700027, "the certificate is not registered"),
    ],
)
def test_aadsts_codes_are_put_into_words(code: int, words: str) -> None:
    cred, entra, clock = make()
    entra.fail = {"error": "invalid_client", "error_codes": [code], "error_description": "x"}
    with pytest.raises(AzureAuthError, match=words) as caught:
        cred.authorization()
    assert f"AADSTS{code}" in str(caught.value)
    assert cred.describe() == "service principal 1b2c · sign-in failed"
    # No storm on Entra: the failure is repeated from memory for a while.
    with pytest.raises(AzureAuthError):
        cred.authorization()
    assert entra.calls == 1
    clock.now += 31
    entra.fail = None
    assert cred.authorization().startswith("Bearer ")
    assert cred.last_failure is None


def test_an_unknown_code_keeps_entras_first_line() -> None:
    text = describe_aadsts(
        {"error": "x", "error_description": "AADSTS1234: odd.\nTrace ID: 1"}, "who"
    )
    assert text == "Entra refused to sign in who: AADSTS1234: odd."


def test_an_exception_from_msal_is_a_plain_auth_error() -> None:
    def boom() -> Mapping[str, Any]:
        raise ConnectionError("no route")

    cred = EntraCredential("managed-identity", "", boom, clock=Clock())
    with pytest.raises(AzureAuthError, match="managed identity \\(system-assigned\\)"):
        cred.get_token("https://dev.azure.com/x")


def test_display_name_comes_from_the_token() -> None:
    import base64
    import json

    payload = base64.urlsafe_b64encode(json.dumps({"app_displayname": "gpuci-lab"}).encode())
    token = f"eyJhbGciOiJIUzI1NiJ9.{payload.decode().rstrip('=')}.c2ln"
    assert token_claims(token)["app_displayname"] == "gpuci-lab"
    cred = EntraCredential(
        "service-principal", "1b2c", lambda: {"access_token": token, "expires_in": 3120},
        clock=Clock(),
    )  # fmt: skip
    cred.authorization()
    assert cred.describe() == "service principal gpuci-lab · token valid 52 min"


def test_a_pat_stays_a_pat() -> None:
    cred = as_credential("abcdefghij0123456789")
    assert isinstance(cred, PatCredential)
    assert cred.expires_at is None and cred.describe() == "PAT"
    assert header_secret(cred.authorization()) == "abcdefghij0123456789"
    assert cred.get_token("u") == "abcdefghij0123456789"
    assert as_credential(cred) is cred


def test_describe_answers_while_a_sign_in_hangs_and_callers_share_one_sign_in() -> None:
    import threading

    release = threading.Event()
    calls: list[int] = []

    def slow() -> Mapping[str, Any]:
        calls.append(1)
        assert release.wait(5)
        return {"access_token": "eyJ0.eyJ9.sig", "expires_in": 3600}

    cred = EntraCredential("service-principal", "1b2c", slow, clock=Clock())
    workers = [threading.Thread(target=cred.authorization) for _ in range(3)]
    for w in workers:
        w.start()
    started = threading.Event()
    for _ in range(5000):  # a deadline of about 5 s
        if calls:
            break
        started.wait(0.001)
    assert calls, "the sign-in started"
    assert cred.describe() == "service principal 1b2c · not signed in yet"  # no wait
    release.set()
    for w in workers:
        w.join(5)
    assert len(calls) == 1
