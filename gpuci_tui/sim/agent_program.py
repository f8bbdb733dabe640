"""The in-process agent program that `SimulatedRuntime` runs in each "container".

It mirrors emulator/agent.sh step by step (env contract, register with
replace, delete the token, one job, heartbeats, exit codes) so the supervisor
sees the same behaviour from the in-process runtime as from real containers.
It prints the real agent's own lines, behind its UTC timestamp (``Listening for
Jobs``, ``Running job: NAME``, ``Job NAME completed with result: Succeeded``),
and, when AZP_GO_FILE is set (the daemon sets it only for an image with the
start gate label), waits after registering for that file as
dockeragent/start.sh does, saying so in start.sh's words. A job of kind ``fake_completed`` prints a "completed" line halfway, as a
job writing to the container's output could.

Exit codes: 0 after a job; 12 left to update the agent (the server required a
newer one: start.sh's code for run.sh --once's update exit); 1 configuration failure (bad PAT, unknown pool,
organisation unreachable) or a lost session; 143 on SIGTERM while idle; 137 when
killed (SIGKILL, out of memory).

tests/sim/test_agent_parity.py runs both agents through the same scenarios and
compares exit codes, the organisation's records and the output lines.
"""

from __future__ import annotations

import time

from gpuci_tui.sim.agent_packages import agent_version_of
from gpuci_tui.sim.container import AgentTiming, Killed, SimContainer
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.records import (
    AgentUpdate,
    JobTicket,
    SimAuthError,
    SimForbiddenError,
    SimNotFoundError,
    SimSessionError,
)

#: How the agent's "completed" line spells a job's result (as agent.sh's case does).
_SAID_RESULTS = {"succeeded": "Succeeded", "failed": "Failed", "canceled": "Canceled"}
#: Variables the real start.sh keeps out of the agent's capabilities (VSO_AGENT_IGNORE).
IGNORED_ENV = frozenset({"AZP_TOKEN", "AZP_TOKEN_FILE"})


# --------------------------------------------------------------------------- the program


def run_agent(c: SimContainer, org: SimOrg, timing: AgentTiming) -> None:
    """Thread target: run the agent program and exit the container with its code."""
    try:
        code = _main(c, org, timing)
    except Killed:
        return
    except Exception as exc:  # noqa: BLE001 - a crash of the emulator is exit 2, like the agent
        c.log(f"agent crashed: {exc.__class__.__name__}: {exc}")
        code = 2
    c.exit(code)


def _main(c: SimContainer, org: SimOrg, timing: AgentTiming) -> int:
    env = c.spec.environment
    if c.broken:
        c.log("exec /azp/start.sh: exec format error")
        return 1
    if timing.boot_delay and c.signal.wait(timing.boot_delay):
        if c.kill_event.is_set():
            raise Killed
        return 143
    url = env.get("AZP_URL", "")
    token_file = env.get("AZP_TOKEN_FILE", "")
    if not url:
        c.log("error: missing AZP_URL environment variable")
        return 1
    if not token_file:
        # The emulator also takes AZP_TOKEN; this runtime refuses a PAT in the environment.
        c.log("error: missing AZP_TOKEN_FILE (or AZP_TOKEN) environment variable")
        return 1
    if token_file != c.spec.token_path or c.token is None:
        c.log(f"error: cannot read the token file {token_file}")
        return 1
    token = "".join(c.token.split())  # the emulator drops CR, LF and blanks too
    if not token:
        c.log(f"error: the token file {token_file} is empty")
        return 1
    pool = env.get("AZP_POOL") or "Default"
    name = env.get("AZP_AGENT_NAME") or c.hostname
    c.log(f"registering agent {name} in pool {pool} at {url}")
    refused = _private_fault(c, org, token, url)
    if refused is not None:
        c.log(refused)
        c.token = None
        return 1
    caps = {k: v for k, v in env.items() if k not in IGNORED_ENV}
    version, said = agent_version_of(c.spec)
    if said:
        c.log(said)
    # config.sh's work before the registration; start.sh's TERM trap waits for it (the
    # emulator's too), so a SIGTERM now takes effect once the agent is registered.
    if c.kill_event.wait(org.startup.register):
        raise Killed
    try:
        agent_id, key = c.call(
            org.register,
            pool,
            name,
            token,
            c.hostname,
            capabilities=caps,
            version=version,
            open_session=False,
        )
    except SimForbiddenError as exc:  # a service principal without the pool's role
        c.log(f"error: registration failed: HTTP 403 {exc.message}")
        return 1
    except SimAuthError:
        c.log(
            f"error: {url} rejected the PAT (401). Check the token and that it has the "
            "Agent Pools (read, manage) scope."
        )
        return 1
    except SimNotFoundError:
        c.log(f"error: agent pool {pool} does not exist in {url}")
        return 1
    finally:
        c.token = None  # start.sh deletes the token file right after registering
    c.agent_id = agent_id
    c.log(f"registered as {name} (id {agent_id})")
    go_file = env.get("AZP_GO_FILE", "")
    if go_file and not _go_given(c, name, go_file):
        c.log("SIGTERM before the session was opened: registered, offline")
        return 143
    # run.sh starting: the agent is offline until its session is open.
    if _interrupted(c, org.startup.session):
        c.log("SIGTERM before the session was opened: registered, offline")
        return 143
    if not _reachable(org):
        c.log(f"error: cannot reach {url} to open the session")
        return 1
    try:
        c.call(org.open_session, agent_id, key)
    except SimSessionError as exc:
        c.log(f"error: could not open the session: {exc}")
        return 1
    c.log(agent_line("Listening for Jobs"))
    ticket = _wait_for_job(c, org, timing, url, agent_id, key)
    if isinstance(ticket, int):
        return ticket
    if isinstance(ticket, AgentUpdate):
        c.log(
            f"the server requires agent {ticket.version} (this one is {version}): leaving to update"
        )
        c.call(org.offline, agent_id, key)
        return 12
    return _run_job(c, org, timing, url, (agent_id, key), ticket)


def agent_line(message: str) -> str:
    """``message`` behind the agent's own UTC timestamp (``2026-01-31 12:00:00Z: …``)."""
    return f"{time.strftime('%Y-%m-%d %H:%M:%SZ', time.gmtime())}: {message}"


def _go_given(c: SimContainer, name: str, go_file: str) -> bool:
    """Wait at the start gate until the daemon writes ``go_file``; False on SIGTERM."""
    c.log(f"[start.sh] registered as {name}; waiting for the go file {go_file}")
    while go_file not in c.files:
        if c.signal.wait(0.1):
            if c.kill_event.is_set():
                raise Killed
            return False
    return True


def _interrupted(c: SimContainer, seconds: float) -> bool:
    """Wait ``seconds`` of agent start-up; True when SIGTERM came first (SIGKILL raises)."""
    if seconds <= 0:
        return c.term.is_set()
    if c.signal.wait(seconds):
        if c.kill_event.is_set():
            raise Killed
        return True
    return False


def _reachable(org: SimOrg) -> bool:
    """False while an "unreachable" fault closes the emulator's port too."""
    return not org.faults.unreachable_now(private=True)


def _private_fault(c: SimContainer, org: SimOrg, token: str, url: str) -> str | None:
    if not _reachable(org):
        return f"error: cannot reach {url} (connection refused or no answer)"
    hit = org.faults.match(private=True, token=token)
    if hit is None:
        return None
    if hit.kind == "delay":
        if c.kill_event.wait(hit.delay):
            raise Killed
        return None
    if hit.kind == "html":
        return (
            f"error: {url} rejected the PAT (203). Check the token and that it has the "
            "Agent Pools (read, manage) scope."
        )
    return f"error: registration failed: {url} answered HTTP {hit.status}"


def _wait_for_job(
    c: SimContainer, org: SimOrg, timing: AgentTiming, url: str, agent_id: int, key: str
) -> JobTicket | AgentUpdate | int:
    """Long-poll until one job (or an update order) arrives; an int is the exit code instead."""
    lost = False
    while True:
        if c.term.is_set():
            if _reachable(org):
                c.call(org.offline, agent_id, key)
            c.log("SIGTERM while idle: went offline")
            return 143
        if not _reachable(org):
            # Like the emulator, retry; the server may sweep us offline meanwhile.
            if not lost:
                c.log(f"cannot reach {url} (no answer); retrying")
                lost = True
            if c.signal.wait(0.2) and c.kill_event.is_set():
                raise Killed
            continue
        try:
            ticket = c.call(org.poll, agent_id, key, timing.poll_timeout, c.signal)
        except SimSessionError as exc:
            c.log(f"error: the agent session ended: {exc}")
            return 1
        if lost:
            c.log("organisation reachable again")
            lost = False
        if ticket is not None:
            return ticket


def _note_term(c: SimContainer, rid: int, noted: bool) -> bool:
    """Say once that a SIGTERM came and the job still runs to its end; True once said."""
    if c.term.is_set() and not noted:
        c.log(f"SIGTERM received: finishing job {rid} first")
        return True
    return noted


def _run_job(
    c: SimContainer,
    org: SimOrg,
    timing: AgentTiming,
    url: str,
    session: tuple[int, str],
    ticket: JobTicket,
) -> int:
    agent_id, key = session
    rid = ticket.request_id
    c.jobs.append(rid)
    c.log(agent_line(f"Running job: {ticket.pipeline}"))
    c.log(f"job {rid} started ({ticket.pipeline} {ticket.run_name})")
    noted = _note_term(c, rid, False)
    if ticket.kind == "oom":
        c.log(f"job {rid} allocates memory until the kernel stops it")
        if c.kill_event.wait(timing.oom_after):
            raise Killed
        c.terminate(137, oom=True)
        raise Killed
    result = ticket.result
    deadline = time.monotonic() + ticket.duration
    fake_at = deadline - ticket.duration / 2 if ticket.kind == "fake_completed" else None
    while (remaining := deadline - time.monotonic()) > 0:
        if c.kill_event.wait(min(remaining, timing.heartbeat_interval)):
            raise Killed
        if fake_at is not None and time.monotonic() >= fake_at:
            fake_at = None  # what a job printing to the container's output can fake
            c.log(agent_line(f"Job {ticket.pipeline} completed with result: Succeeded"))
        noted = _note_term(c, rid, noted)
        if not _reachable(org):
            continue  # a heartbeat that cannot be sent; the server may abandon the job
        try:
            stop = c.call(org.heartbeat, agent_id, key, rid)
        except SimSessionError as exc:
            c.log(f"error: job {rid} lost its agent session: {exc}")
            return 1
        if stop:
            c.log(f"job {rid} was canceled by the server")
            result = "canceled"
            break
    _note_term(c, rid, noted)
    # The real agent prints this as its job's worker ends, before it reports the result.
    said = _SAID_RESULTS.get(result, result)
    c.log(agent_line(f"Job {ticket.pipeline} completed with result: {said}"))
    if not _reachable(org):
        c.log(f"could not report job {rid}: cannot reach {url}")
    else:
        try:
            c.call(org.finish, rid, result, key)
        except SimSessionError as exc:
            c.log(f"error: job {rid} lost its agent session: {exc}")
            return 1
    c.log(f"job {rid} {result}")
    if _reachable(org):
        c.call(org.offline, agent_id, key)
    return 0


__all__ = ["AgentTiming", "Killed", "SimContainer", "run_agent"]
