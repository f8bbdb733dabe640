"""The emulator's shell agent and the in-process agent program behave the same.

Every scenario runs twice with the same inputs: emulator/agent.sh in a real
container against a `SimServer`, and agent_program.py in a `SimulatedRuntime`,
each against its own fresh organisation. The outcomes must be equal (exit code,
the organisation's record of the agent and its jobs, the agent's calls that
change what the organisation shows, the token file, the kernel's OOM flag and
every output line, with run-specific values as placeholders) and match what the
scenario states. Where they differed, the real agent's behaviour decided which
side was fixed (see the commits that added this file).
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuci_tui.sim.records import AgentStartup

from .conftest import READ_ONLY_PAT, TOKEN_PATH
from .parity_sides import (
    GO_FILE,
    NAME,
    POOL_ID,
    EmulatorSide,
    Outcome,
    ProgramSide,
    Run,
    Scenario,
    Side,
    TracingOrg,
    outcome,
)

pytestmark = pytest.mark.docker

#: Behaviours one side cannot express, stated instead of silently left out.
EXCLUDED = {
    "AZP_TOKEN instead of a token file": "the emulator takes it (start.sh does); the "
    "runtime refuses to start a container with the PAT in its environment, by design",
    "AZP_URL that is not http://": "only the emulator parses the URL (nc speaks plain HTTP)",
    "SIGTERM during the session step": "the program stops at once (never online); the "
    "emulator's foreground request ends first and it leaves from its idle loop. Both exit "
    "143 and end offline, but the emulator gives no lasting sign of being in that step",
    "SIGINT": "the runtime has no SIGINT; the emulator treats it like SIGTERM",
    "boot delay, broken image, crash exit 2": "knobs of the runtime alone (AgentTiming, "
    "broken_images, an exception in the program); the emulator has no counterpart",
    "status, rate-limit and delay faults": "the HTTP server applies them to every /_sim "
    "request; the program only checks them before its registration",
}

REG = f"registering agent {NAME} in pool gpu at {{url}}"
REGD = f"registered as {NAME} (id {{agent_id}})"
ONLINE = "{stamp}: Listening for Jobs"
STARTED = ("{stamp}: Running job: train - main", "job {rid1} started (train - main {run1})")
#: start.sh's line at the start gate, and the agent's line at the end of its job.
AWAITING_GO = f"[start.sh] registered as {NAME}; waiting for the go file {GO_FILE}"
COMPLETED = "{{stamp}}: Job train - main completed with result: {}"
SESSION_ENDED = "The agent session ended (replaced or deleted)."
REJECTED = (
    "rejected the PAT ({}). Check the token and that it has the Agent Pools (read, manage) scope."
)
SESSION = ("register", "open_session")
IDLE = (REG, REGD, ONLINE)
BUSY = (*IDLE, *STARTED)


def _two_jobs(r: Run) -> None:
    r.queue(0.5)
    r.queue(0.5)  # --once: never taken


def _unreachable(r: Run) -> None:
    r.org.faults.unreachable()
    r.side.settle()


def _outage_while_busy(r: Run) -> None:
    r.busy()
    _unreachable(r)  # no heartbeat gets through: the organisation abandons the job
    assert r.org.wait_for(lambda o: r.abandoned(), timeout=30), "the job was not abandoned"
    r.org.faults.clear()
    r.side.settle()


def _pre_registered(r: Run) -> None:
    r.old_id, _ = r.org.other_registration("old-host")


def _sigterm_busy(r: Run) -> None:
    rid = r.queue(3.0)
    r.printed(f"job {rid} started")
    r.side.sigterm()


def _sigterm_idle(r: Run) -> None:
    r.polling()
    r.side.sigterm()


def _sigterm_registering(r: Run) -> None:
    r.printed("registering agent")  # the registration step takes 1.5 s from here
    r.side.sigterm()


def _go_after_a_wait(r: Run) -> None:
    r.printed("waiting for the go file")
    r.queue(0.5)
    # Registered and a job queued, but no session before the go: the job waits.
    assert not r.org.wait_for(lambda o: o.job(r.rids[0]).state != "queued", timeout=1.0)
    r.side.give_go()


def _sigterm_at_the_gate(r: Run) -> None:
    r.printed("waiting for the go file")
    r.side.sigterm()


def _sigkill_busy(r: Run) -> None:
    r.busy()
    r.side.sigkill()


def _deleted_idle(r: Run) -> None:
    r.polling()
    r.org.delete_agent(POOL_ID, r.agent_id())


def _registered_elsewhere_idle(r: Run) -> None:
    r.polling()
    r.org.other_registration("other-host", online=False)


def _deleted_busy(r: Run) -> None:
    r.busy()
    r.org.delete_agent(POOL_ID, r.agent_id())


LOST_BUSY = (
    *BUSY,
    f"error: job {{rid1}} lost its agent session: {SESSION_ENDED}",
)
LOST_IDLE = (*IDLE, f"error: the agent session ended: {SESSION_ENDED}")

UPDATE_LINE = "the server requires agent 4.270.0 (this one is 4.264.2): leaving to update"

SCENARIOS = [
    Scenario(
        # issue 20: the server would hand it a job but requires a newer agent: the job
        # stays queued and the --once agent leaves to update (start.sh's exit 12).
        "out-of-date-agent-leaves-to-update-exit-12",
        12,
        (*IDLE, UPDATE_LINE),
        (*SESSION, "offline"),
        jobs=((None, 0),),
        before=lambda r: r.org.require_agent_version("4.270.0"),
        drive=lambda r: r.queue(0.5),
    ),
    Scenario(
        "one-job-exit-0",
        0,
        (*BUSY, COMPLETED.format("Succeeded"), "job {rid1} succeeded"),
        (*SESSION, "finish=succeeded", "offline"),
        jobs=(("succeeded", 1), (None, 0)),
        drive=_two_jobs,
    ),
    Scenario(
        "name-defaults-to-hostname",
        0,
        (
            "registering agent {hostname} in pool gpu at {url}",
            "registered as {hostname} (id {agent_id})",
            ONLINE,
            *STARTED,
            COMPLETED.format("Failed"),
            "job {rid1} failed",
        ),
        (*SESSION, "finish=failed", "offline"),
        jobs=(("failed", 1),),
        env={"AZP_AGENT_NAME": None},
        drive=lambda r: r.queue(0.5, "fail"),
    ),
    Scenario(
        "replaces-an-existing-registration",
        0,
        (*BUSY, COMPLETED.format("Succeeded"), "job {rid1} succeeded"),
        (*SESSION, "finish=succeeded", "offline"),
        jobs=(("succeeded", 1),),
        before=_pre_registered,
        drive=lambda r: r.queue(0.5),
    ),
    Scenario(
        "bad-pat-exit-1",
        1,
        (REG, "error: {url} " + REJECTED.format(401)),
        ("register!SimAuthError",),
        token="bad-pat-0123456789abcdefghijklmnopqrstuvwxyz0123456",
    ),
    Scenario(
        "read-only-pat-exit-1",
        1,
        (REG, "error: {url} " + REJECTED.format(401)),
        ("register!SimScopeError",),
        token=READ_ONLY_PAT,
    ),
    Scenario(
        "sign-in-page-exit-1",
        1,
        (REG, "error: {url} " + REJECTED.format(203)),
        before=lambda r: r.org.faults.html_signin(private=True),
    ),
    Scenario(
        "unknown-pool-exit-1",
        1,
        (
            f"registering agent {NAME} in pool cpu at {{url}}",
            "error: agent pool cpu does not exist in {url}",
        ),
        ("register!SimNotFoundError",),
        env={"AZP_POOL": "cpu"},
    ),
    Scenario(
        "pool-defaults-to-Default",
        1,
        (
            f"registering agent {NAME} in pool Default at {{url}}",
            "error: agent pool Default does not exist in {url}",
        ),
        ("register!SimNotFoundError",),
        env={"AZP_POOL": None},
    ),
    Scenario(
        "unreachable-at-registration-exit-1",
        1,
        (REG, "error: cannot reach {url} (connection refused or no answer)"),
        before=_unreachable,
    ),
    Scenario(
        "sigterm-while-idle-exit-143",
        143,
        (*IDLE, "SIGTERM while idle: went offline"),
        (*SESSION, "offline"),
        drive=_sigterm_idle,
    ),
    Scenario(
        "sigterm-while-busy-finishes-the-job-exit-0",
        0,
        (
            *BUSY,
            "SIGTERM received: finishing job {rid1} first",
            COMPLETED.format("Succeeded"),
            "job {rid1} succeeded",
        ),
        (*SESSION, "finish=succeeded", "offline"),
        jobs=(("succeeded", 1),),
        drive=_sigterm_busy,
    ),
    Scenario(
        "sigterm-during-registration-registers-then-exit-143",
        143,
        (REG, REGD, "SIGTERM before the session was opened: registered, offline"),
        ("register",),
        startup=AgentStartup(register=1.5),
        drive=_sigterm_registering,
    ),
    Scenario(
        "sigkill-while-busy-exit-137",
        137,
        BUSY,
        SESSION,
        jobs=(("abandoned", 1),),
        drive=_sigkill_busy,
        after=Run.abandoned,
    ),
    Scenario(
        "oom-job-exit-137",
        137,
        (*BUSY, "job {rid1} allocates memory until the kernel stops it"),
        SESSION,
        jobs=(("abandoned", 1),),
        drive=lambda r: r.queue(5.0, "oom"),
        after=Run.abandoned,
    ),
    Scenario(
        "canceled-by-the-server-exit-0",
        0,
        (
            *BUSY,
            "job {rid1} was canceled by the server",
            COMPLETED.format("Canceled"),
            "job {rid1} canceled",
        ),
        (*SESSION, "finish=canceled", "offline"),
        jobs=(("canceled", 1),),
        drive=lambda r: r.org.cancel_job(r.busy()),
    ),
    Scenario(
        "deleted-while-idle-exit-1",
        1,
        LOST_IDLE,
        SESSION,
        drive=_deleted_idle,
    ),
    Scenario(
        "registered-elsewhere-while-idle-exit-1",
        1,
        LOST_IDLE,
        SESSION,
        drive=_registered_elsewhere_idle,
    ),
    Scenario(
        "deleted-while-busy-exit-1",
        1,
        LOST_BUSY,
        SESSION,
        jobs=(("abandoned", 1),),
        drive=_deleted_busy,
    ),
    Scenario(
        "outage-while-busy-loses-the-session-exit-1",
        1,
        LOST_BUSY,
        SESSION,
        jobs=(("abandoned", 1),),
        drive=_outage_while_busy,
    ),
    Scenario(
        # The start gate: registered, then nothing until the go file is there.
        "start-gate-waits-for-the-go-then-one-job-exit-0",
        0,
        (
            REG,
            REGD,
            AWAITING_GO,
            ONLINE,
            *STARTED,
            COMPLETED.format("Succeeded"),
            "job {rid1} succeeded",
        ),
        (*SESSION, "finish=succeeded", "offline"),
        jobs=(("succeeded", 1),),
        env={"AZP_GO_FILE": GO_FILE},
        drive=_go_after_a_wait,
    ),
    Scenario(
        "sigterm-at-the-start-gate-registered-offline-exit-143",
        143,
        (REG, REGD, AWAITING_GO, "SIGTERM before the session was opened: registered, offline"),
        ("register",),
        env={"AZP_GO_FILE": GO_FILE},
        drive=_sigterm_at_the_gate,
    ),
    Scenario(
        # A job can print what only the agent should: a hint, never proof.
        "a-job-prints-a-fake-completed-line-exit-0",
        0,
        (
            *BUSY,
            COMPLETED.format("Succeeded"),
            COMPLETED.format("Succeeded"),
            "job {rid1} succeeded",
        ),
        (*SESSION, "finish=succeeded", "offline"),
        jobs=(("succeeded", 1),),
        drive=lambda r: r.queue(2.0, "fake_completed"),
    ),
    Scenario(
        "missing-AZP_URL-exit-1",
        1,
        ("error: missing AZP_URL environment variable",),
        token_kept=True,
        env={"AZP_URL": None},
    ),
    Scenario(
        "missing-AZP_TOKEN_FILE-exit-1",
        1,
        ("error: missing AZP_TOKEN_FILE (or AZP_TOKEN) environment variable",),
        token_kept=True,
        env={"AZP_TOKEN_FILE": None},
    ),
    Scenario(
        "unreadable-token-file-exit-1",
        1,
        ("error: cannot read the token file /run/azp/elsewhere",),
        token_kept=True,
        env={"AZP_TOKEN_FILE": "/run/azp/elsewhere"},
    ),
    Scenario(
        "empty-token-file-exit-1",
        1,
        (f"error: the token file {TOKEN_PATH} is empty",),
        token_kept=True,
        token="",
    ),
]


def _run(scenario: Scenario, side: Side) -> Outcome:
    base = {
        "AZP_URL": side.url,
        "AZP_POOL": "gpu",
        "AZP_AGENT_NAME": NAME,
        "AZP_TOKEN_FILE": TOKEN_PATH,
        "AZP_WORK": "/azp/_work",
        "GPUCI_SLOT": "1",
    }
    merged = {**base, **scenario.env}
    env = {k: v for k, v in merged.items() if v is not None}
    r = Run(side)
    try:
        scenario.before(r)
        side.start(env, scenario.token)
        scenario.drive(r)
        code = side.wait_exit(60)
        if scenario.after is not None:
            after = scenario.after
            assert r.org.wait_for(lambda o: after(r), timeout=30), f"{scenario.id}: after"
        return outcome(side, code, env, r.rids, r.old_id)
    finally:
        side.close()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
def test_both_agents_behave_the_same(
    scenario: Scenario, docker_client: Any, emulator_image: str, run_label: str
) -> None:
    emulated = _run(
        scenario,
        EmulatorSide(TracingOrg(scenario.startup), docker_client, emulator_image, run_label),
    )
    programmed = _run(scenario, ProgramSide(TracingOrg(scenario.startup)))
    assert programmed == emulated, "the in-process agent differs from the emulator"
    assert emulated.exit_code == scenario.exit_code
    assert emulated.lines == list(scenario.lines)
    assert emulated.calls == list(scenario.calls)
    assert [(j["result"], j["assign_count"]) for j in emulated.jobs] == list(scenario.jobs)
    assert emulated.token_file_present == scenario.token_kept
    assert emulated.oom_killed == (scenario.id == "oom-job-exit-137")
    if emulated.agent is not None:
        assert emulated.agent["online"] is False
    if emulated.agent is not None and emulated.agent["hostname"] == "{hostname}":
        assert emulated.agent["env_not_in_capabilities"] == []
        assert emulated.agent["token_capabilities"] == []
        replaced = scenario.before is _pre_registered
        assert emulated.agent["replaced"] == replaced
        assert emulated.agent["registrations"] == (2 if replaced else 1)


def test_exclusions_are_not_scenarios() -> None:
    """What one side cannot express is listed in EXCLUDED, never run half-way."""
    assert EXCLUDED and not {s.id for s in SCENARIOS} & set(EXCLUDED)
