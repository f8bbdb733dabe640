"""The simulated agent program as an asyncio task: `sim.agent_program` on virtual time.

`VirtualRuntime` runs one per started container on the `VirtualTimeLoop`. It takes
the steps of `gpuci_tui.sim.agent_program._main` (itself the emulator's agent.sh):
the env contract, seconds to register, the start gate, seconds to open the session,
one job with heartbeats, the agent's own output lines, the same exit codes. Its waits
are asyncio waits (virtual seconds) and its polls for a job ask the organisation
without blocking, every `POLL_EVERY` virtual seconds, where the thread blocks in a
long poll: no thread, so the loop knows when nothing more can happen before its next
timer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from gpuci_tui.sim.agent_packages import agent_version_of
from gpuci_tui.sim.agent_program import _SAID_RESULTS, IGNORED_ENV, agent_line
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

#: Virtual seconds between two asks for a job (the real agent's long poll answers at once).
POLL_EVERY = 0.05


class Signals:
    """Wakes the agent task when its container is signalled or given a file."""

    def __init__(self) -> None:
        self.poke = asyncio.Event()
        self.exited = asyncio.Event()

    async def pause(self, c: SimContainer, seconds: float) -> None:
        """Wait ``seconds`` (virtual), ended early only by a SIGKILL, which raises Killed."""
        await self._until(lambda: c.kill_event.is_set(), seconds)
        if c.kill_event.is_set():
            raise Killed

    async def interrupted(
        self, c: SimContainer, seconds: float, given: Callable[[], bool] = lambda: False
    ) -> bool:
        """Wait ``seconds`` or until ``given()``; True when a SIGTERM came first (a SIGKILL
        raises Killed)."""
        await self._until(lambda: c.signal.is_set() or given(), seconds)
        if c.kill_event.is_set():
            raise Killed
        return c.term.is_set()

    async def _until(self, done: Callable[[], bool], seconds: float) -> None:
        """Nap until ``done()`` or ``seconds`` passed; a poke makes it look again."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while not done() and (left := deadline - loop.time()) > 0:
            self.poke.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.poke.wait(), left)


async def run_agent_virtually(
    c: SimContainer, org: SimOrg, timing: AgentTiming, signals: Signals
) -> None:
    """Task body: run the agent program and exit the container with its code."""
    try:
        code = await _main(c, org, timing, signals)
    except Killed:
        return
    except Exception as exc:  # noqa: BLE001 - a crash of the emulator is exit 2, like the agent
        c.log(f"agent crashed: {exc.__class__.__name__}: {exc}")
        code = 2
    c.exit(code)


def _reachable(org: SimOrg) -> bool:
    return not org.faults.unreachable_now(private=True)


async def _main(c: SimContainer, org: SimOrg, timing: AgentTiming, signals: Signals) -> int:
    env = c.spec.environment
    if c.broken:
        c.log("exec /azp/start.sh: exec format error")
        return 1
    if timing.boot_delay and await signals.interrupted(c, timing.boot_delay):
        return 143
    url = env.get("AZP_URL", "")
    token_file = env.get("AZP_TOKEN_FILE", "")
    if not url or not token_file or token_file != c.spec.token_path or c.token is None:
        c.log(f"error: cannot read the token file {token_file}")
        return 1
    token = "".join(c.token.split())
    pool = env.get("AZP_POOL") or "Default"
    name = env.get("AZP_AGENT_NAME") or c.hostname
    c.log(f"registering agent {name} in pool {pool} at {url}")
    if not _reachable(org):
        c.log(f"error: cannot reach {url} (connection refused or no answer)")
        c.token = None
        return 1
    caps = {k: v for k, v in env.items() if k not in IGNORED_ENV}
    version, said = agent_version_of(c.spec)
    if said:
        c.log(said)
    await signals.pause(c, org.startup.register)  # config.sh's work; SIGTERM waits for it
    try:
        agent_id, key = c.call(
            org.register, pool, name, token, c.hostname,
            capabilities=caps, version=version, open_session=False,
        )  # fmt: skip
    except SimForbiddenError as exc:
        c.log(f"error: registration failed: HTTP 403 {exc.message}")
        return 1
    except SimAuthError:
        c.log(f"error: {url} rejected the PAT (401).")
        return 1
    except SimNotFoundError:
        c.log(f"error: agent pool {pool} does not exist in {url}")
        return 1
    finally:
        c.token = None  # start.sh deletes the token file right after registering
    c.agent_id = agent_id
    c.log(f"registered as {name} (id {agent_id})")
    go_file = env.get("AZP_GO_FILE", "")
    if go_file:
        c.log(f"[start.sh] registered as {name}; waiting for the go file {go_file}")
        while go_file not in c.files:
            if await signals.interrupted(c, 3600.0, lambda: go_file in c.files):
                c.log("SIGTERM before the session was opened: registered, offline")
                return 143
    if await signals.interrupted(c, org.startup.session):
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
    ticket = await _wait_for_job(c, org, signals, url, (agent_id, key))
    if isinstance(ticket, int):
        return ticket
    if isinstance(ticket, AgentUpdate):
        c.log(
            f"the server requires agent {ticket.version} (this one is {version}): leaving to update"
        )
        c.call(org.offline, agent_id, key)
        return 12
    return await _run_job(c, org, timing, signals, url, (agent_id, key), ticket)


async def _wait_for_job(
    c: SimContainer, org: SimOrg, signals: Signals, url: str, session: tuple[int, str]
) -> JobTicket | AgentUpdate | int:
    agent_id, key = session
    while True:
        if c.term.is_set():
            if _reachable(org):
                c.call(org.offline, agent_id, key)
            c.log("SIGTERM while idle: went offline")
            return 143
        if _reachable(org):
            try:
                ticket = c.call(org.poll, agent_id, key, 0.0)
            except SimSessionError as exc:
                c.log(f"error: the agent session ended: {exc}")
                return 1
            if ticket is not None:
                return ticket
        await signals.interrupted(c, POLL_EVERY)


async def _run_job(
    c: SimContainer,
    org: SimOrg,
    timing: AgentTiming,
    signals: Signals,
    url: str,
    session: tuple[int, str],
    ticket: JobTicket,
) -> int:
    agent_id, key = session
    rid = ticket.request_id
    c.jobs.append(rid)
    c.log(agent_line(f"Running job: {ticket.pipeline}"))
    c.log(f"job {rid} started ({ticket.pipeline} {ticket.run_name})")
    noted = False
    if ticket.kind == "oom":
        c.log(f"job {rid} allocates memory until the kernel stops it")
        await signals.pause(c, timing.oom_after)
        c.terminate(137, oom=True)
        raise Killed
    loop = asyncio.get_running_loop()
    result = ticket.result
    deadline = loop.time() + ticket.duration
    fake_at = deadline - ticket.duration / 2 if ticket.kind == "fake_completed" else None
    while (remaining := deadline - loop.time()) > 0:
        await signals.pause(c, min(remaining, timing.heartbeat_interval))
        if fake_at is not None and loop.time() >= fake_at:
            fake_at = None
            c.log(agent_line(f"Job {ticket.pipeline} completed with result: Succeeded"))
        if c.term.is_set() and not noted:
            noted = True
            c.log(f"SIGTERM received: finishing job {rid} first")
        if not _reachable(org):
            continue
        try:
            stop = c.call(org.heartbeat, agent_id, key, rid)
        except SimSessionError as exc:
            c.log(f"error: job {rid} lost its agent session: {exc}")
            return 1
        if stop:
            c.log(f"job {rid} was canceled by the server")
            result = "canceled"
            break
    c.log(agent_line(f"Job {ticket.pipeline} completed with result: "
                     f"{_SAID_RESULTS.get(result, result)}"))  # fmt: skip
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
