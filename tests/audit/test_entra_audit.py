"""Drills on the real daemon with a service principal (issue 21): it signs in through
msal against the simulated tenant, its agents register with short-lived access tokens,
and the client secret is nowhere but its 0600 file.

* the token expires while jobs run: a new one is acquired, no job is dropped;
* the secret is rotated in its file: the next sign-in uses it, without a restart;
* the principal loses the pool's Administrator role: the reason is stated, no crash loop.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from gpuci_tui.core.config.loader import save_config
from gpuci_tui.sim.login import SimLogin
from tests.audit.test_secret_audit import jobs_done, process_tree
from tests.real.rig import Rig, make_rig, wait_for

pytestmark = pytest.mark.docker

CLIENT = "11111111-2222-4333-8444-555555555555"
SECRET = "Q~audit.secret-0123456789abcdefghijklmnopq"
ROTATED = "Q~rotated.secret-0123456789abcdefghijklmn"
#: Access tokens live this long: the daemon renews them at the smaller of 300 s and half
#: their lifetime before expiry, so a new sign-in comes every ~6 s while it works (Entra's
#: live an hour or more).
TOKEN_LIFETIME = 12
#: ``[supervisor] role_retry``: while the pool role is refused, it is checked this often
#: (60 s by default; the drill waits for the check that finds it back).
ROLE_RETRY = 3.0


@pytest.fixture(scope="module")
def emulator_image(docker_client: Any) -> str:
    from gpuci_tui.sim.image import build_emulator_image

    return build_emulator_image(docker_client)


@pytest.fixture
def sp_rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    for rig in make_rig(tmp_path, docker_client, emulator_image, role_retry=ROLE_RETRY):
        login = SimLogin(rig.org.entra).start()
        try:
            rig.org.entra.add_app("gpuci-lab", client_id=CLIENT, secret=SECRET)
            azure = dataclasses.replace(
                rig.config.azure,
                auth="service-principal",
                tenant_id="contoso.onmicrosoft.com",
                client_id=CLIENT,
                authority=login.url,
            )
            rig.config = dataclasses.replace(rig.config, azure=azure)
            save_config(rig.config, rig.config_path)
            secret_file = tmp_path / "client-secret"
            secret_file.write_text(SECRET + "\n")
            secret_file.chmod(0o600)
            del rig.env["GPUCI_PAT_FILE"]  # no PAT anywhere: only the principal
            rig.env.update(
                GPUCI_CLIENT_SECRET_FILE=str(secret_file),
                REQUESTS_CA_BUNDLE=str(login.ca_file),
            )
            yield rig
        finally:
            login.stop()


def run(rig: Rig, n: int, duration: float = 0.3) -> list[int]:
    jobs = [rig.org.queue_job(rig.pool_id, duration=duration) for _ in range(n)]
    wait_for(lambda: jobs_done(rig, jobs), 120, f"{n} jobs")
    return jobs


def test_tokens_expire_and_the_secret_rotates_while_jobs_run(sp_rig: Rig) -> None:
    rig = sp_rig
    entra = rig.org.entra
    entra.token_lifetime = TOKEN_LIFETIME
    daemon = rig.start_daemon()
    wait_for(rig.all_idle, 60, "two idle agents registered by the principal")
    assert [how for _, how in entra.sign_ins][:1] == ["secret"]
    # status (and the console's header) name the identity and its token's state.
    status = rig.cli("status").stdout
    assert "azure: ok" in status and "— service principal gpuci-lab · token valid" in status
    first = len(entra.sign_ins)
    t0 = time.time()
    deadline = time.monotonic() + 90
    jobs = []
    # Jobs run until the token was renewed twice while they did (each ~6 s after the last).
    while len(entra.sign_ins) < first + 2:
        assert time.monotonic() < deadline, f"no renewal while jobs ran: {entra.sign_in_times}"
        jobs += run(rig, 2)
    assert all(rig.org.job(j).result == "succeeded" for j in jobs), "no job dropped"
    # Renewed, not used expired: the daemon renews when half the lifetime is left (a
    # call after that signs in first), so apart from the sign-ins themselves no renewal
    # waits for a refusal; the refusals are counted just below.
    times = entra.sign_in_times
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert gaps and min(gaps) >= entra.token_lifetime / 2 - 1, gaps
    # At most one retried call: the organisation refused (401/203) at most one request of
    # the daemon or its agents (the transport then acquires a new token and retries once).
    refused = [e for e in rig.org.request_log(t0) if e.status in (401, 203)]
    assert len(refused) <= 1, [(e.method, e.route, e.status) for e in refused]
    assert rig.org.request_log(t0), "the log saw the calls"

    # A token the organisation refuses before its time while jobs run (clock skew, a
    # revocation): every call in flight at that instant is refused once and retried once
    # with a new token, which one sign-in serves for all of them; nothing is refused after
    # that, and no job is dropped. (Expiring in the normal way, above, retries nothing.)
    t1 = time.time()
    offset = entra.token_lifetime + 1.0
    entra.clock = lambda: time.time() + offset
    jumped = len(entra.sign_ins)
    jobs = run(rig, 2)
    wait_for(lambda: len(entra.sign_ins) > jumped, 30, "a sign-in after the early expiry")
    jobs += run(rig, 2)
    assert all(rig.org.job(j).result == "succeeded" for j in jobs), "no job dropped"
    public = [e for e in rig.org.request_log(t1) if not e.private]
    refused = [e for e in public if e.status in (401, 203)]
    first_ok = min(e.at for e in public if e.status == 200)
    assert refused and all(e.at < first_ok for e in refused), "none once the new token is used"
    # The daemon's callers that can be in flight at once: the pool read, a history read,
    # a write (a measured run: 3, one sign-in for all of them).
    assert len(refused) <= 4, [(e.method, e.route) for e in refused]
    signed_in = [t - offset for t in entra.sign_in_times[jumped:]]  # on the real clock
    assert sum(1 for t in signed_in if t <= first_ok) == 1, "one sign-in for every refused call"
    for e in refused:  # each refused call was retried, once, and answered
        assert any((o.method, o.route, o.status) == (e.method, e.route, 200) for o in public)
    # An agent container that started in that instant registered with the refused token:
    # its start fails once and the next one gets the new token.
    registrations = [e for e in rig.org.request_log(t1) if e.private and e.status == 401]
    assert len(registrations) <= rig.lanes * 2, [(e.route, e.at - t1) for e in registrations]

    # Rotation: Entra takes only the new secret from now on, the file holds it.
    entra.set_secret(CLIENT, ROTATED)
    Path(rig.env["GPUCI_CLIENT_SECRET_FILE"]).write_text(ROTATED + "\n")
    rotated_at = len(entra.sign_ins)
    wait_for(lambda: len(entra.sign_ins) > rotated_at, 60, "a sign-in with the rotated secret")
    run(rig, 2)
    assert daemon.poll() is None, "picked up without a restart"

    # Nowhere but in its file: the daemon's log, its processes' argv and environment,
    # every container's configuration.
    log = rig.daemon_log()
    for secret in (SECRET, ROTATED):
        assert secret not in log
        for proc in process_tree(daemon.pid):
            assert secret not in " ".join(proc.cmdline())
            assert secret.encode() not in Path(f"/proc/{proc.pid}/environ").read_bytes()
        for c in rig.containers():
            try:
                c.reload()
            except docker.errors.NotFound:
                continue  # an agent that ended after its job meanwhile: nothing to read
            assert secret not in json.dumps(c.attrs)
    assert "eyJ" not in log, "no access token in the daemon's log"


def _pool_role(rig: Rig, admin: bool) -> None:
    """Take or give back the principal's pool role through the sim's control endpoint."""
    import requests

    body = f"admin={int(admin)}\nclient_id={CLIENT}\n"
    answer = requests.post(f"{rig.server.url}/_sim/pool_role", data=body, timeout=10)
    assert answer.status_code == 200 and "changed=1" in answer.text, answer.text


def _refused_registrations(rig: Rig, since: float) -> int:
    return sum(
        1
        for e in rig.org.request_log(since)
        if e.private and e.route.endswith("/register") and e.status == 403
    )


def test_a_principal_that_loses_the_pool_role_is_told_and_does_not_crash_loop(
    sp_rig: Rig,
) -> None:
    """The role taken while a job runs: the job finishes, starts wait with the reason (header,
    status, the slots), no slot parks, no container churns; the role given back, the
    agents start by themselves (no operator's resume)."""
    rig = sp_rig
    reason = (
        "the service principal gpuci-lab is not an Administrator of pool gpu: add it in "
        "Organization settings → Agent pools → gpu → Security"
    )
    daemon = rig.start_daemon()
    wait_for(rig.all_idle, 60, "two idle agents registered by the principal")
    t0 = time.time()
    long_job = rig.org.queue_job(rig.pool_id, duration=15.0)
    wait_for(lambda: rig.org.job(long_job).agent_name, 20, "the long job assigned")
    _pool_role(rig, admin=False)
    # The other slot's agent runs a job and leaves; its successor's registration is refused.
    short = rig.org.queue_job(rig.pool_id, duration=0.3)
    wait_for(lambda: rig.org.job(short).result is not None, 30, "the short job")
    wait_for(lambda: _refused_registrations(rig, t0) > 0, 30, "a refused registration")
    wait_for(lambda: reason in _azure_message(rig), 30, "the reason in the Azure health")
    held_at = _refused_registrations(rig, t0)
    out = rig.cli("status")
    assert out.returncode == 0 and reason in out.stdout, out.stdout
    # Until the running job ends: no slot parks, a slot that cannot start says why, no churn.
    messages: set[str] = set()

    def watch() -> bool:
        snap = rig.snap() or {}
        slots = snap.get("slots", [])
        assert all(s["state"] != "parked" for s in slots), slots
        messages.update(s["message"] for s in slots)
        return rig.org.job(long_job).result is not None

    wait_for(watch, 40, "the long job, which the refusal does not touch")
    assert rig.org.job(long_job).result == "succeeded"
    assert f"waiting for the organisation: {reason}" in messages, messages
    # At most one registration in flight per agent lane when the refusal was recognised.
    assert _refused_registrations(rig, t0) - held_at <= rig.lanes * 2
    assert daemon.poll() is None, "the daemon stays up"
    # The role given back: the next check (every ROLE_RETRY) lets the agents start by
    # themselves, with no operator's resume.
    _pool_role(rig, admin=True)
    wait_for(rig.all_idle, 60, "agents once the role is given back")
    assert _azure(rig).get("state") == "ok"
    assert _refused_registrations(rig, t0) <= held_at + rig.lanes * 2, "no crash loop"
    assert len(rig.org.entra.sign_ins) <= 3, "no sign-in storm"


def _azure(rig: Rig) -> dict[str, Any]:
    return (rig.snap() or {}).get("azure") or {}


def _azure_message(rig: Rig) -> str:
    return str(_azure(rig).get("message") or "")


def test_a_certificates_key_and_passphrase_are_nowhere_but_in_their_files(
    sp_rig: Rig, tmp_path: Path
) -> None:
    from tests.sim.test_entra import _certificate

    rig = sp_rig
    pem, cert = _certificate(passphrase=b"audit-passphrase-0123")
    key_file = tmp_path / "sp.pem"
    key_file.write_text(pem)
    key_file.chmod(0o600)
    phrase_file = tmp_path / "passphrase"
    phrase_file.write_text("audit-passphrase-0123\n")
    phrase_file.chmod(0o600)
    app = rig.org.entra.app(CLIENT)
    app.secrets.clear()  # only the certificate signs in
    rig.org.entra.add_certificate(CLIENT, cert)
    azure = dataclasses.replace(rig.config.azure, client_certificate=str(key_file))
    rig.config = dataclasses.replace(rig.config, azure=azure)
    save_config(rig.config, rig.config_path)
    del rig.env["GPUCI_CLIENT_SECRET_FILE"]
    rig.env["GPUCI_CERT_PASSPHRASE_FILE"] = str(phrase_file)

    daemon = rig.start_daemon()
    wait_for(rig.all_idle, 60, "two idle agents registered by the principal")
    run(rig, 2)
    assert {how for _, how in rig.org.entra.sign_ins} == {"certificate"}
    key_lines = [line for line in pem.splitlines() if line and not line.startswith("-----")]
    needles = ["audit-passphrase-0123", *key_lines[:3]]
    assert any(n in key_file.read_text() for n in needles), "the search finds them where they are"
    log = rig.daemon_log()
    for needle in needles:
        assert needle not in log
        for proc in process_tree(daemon.pid):
            assert needle not in " ".join(proc.cmdline())
            assert needle.encode() not in Path(f"/proc/{proc.pid}/environ").read_bytes()
        for c in rig.containers():
            try:
                c.reload()
            except docker.errors.NotFound:
                continue  # an agent that ended after its job meanwhile: nothing to read
            assert needle not in json.dumps(c.attrs)
    assert "PRIVATE KEY" not in log and "eyJ" not in log
