"""The in-process agent program that `SimulatedRuntime` runs in each "container".

It mirrors emulator/agent.sh step by step (env contract, register with
replace, delete the token, one job, heartbeats, exit codes) so the supervisor
sees the same behaviour from the in-process runtime as from real containers.

Exit codes: 0 after a job; 12 left to update the agent (the server required a
newer one: start.sh's code for run.sh --once's update exit); 1 configuration failure (bad PAT, unknown pool,
organisation unreachable) or a lost session; 143 on SIGTERM while idle; 137 when
killed (SIGKILL, out of memory).

tests/sim/test_agent_parity.py runs both agents through the same scenarios and
compares exit codes, the organisation's records and the output lines.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from gpuci_tui.core.protocols import ContainerInfo, ContainerSpec
from gpuci_tui.sim.agent_packages import agent_version_of
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.records import (
    AgentUpdate,
    JobTicket,
    SimAuthError,
    SimForbiddenError,
    SimNotFoundError,
    SimSessionError,
)

P = ParamSpec("P")
R = TypeVar("R")

#: Variables the real start.sh keeps out of the agent's capabilities (VSO_AGENT_IGNORE).
IGNORED_ENV = frozenset({"AZP_TOKEN", "AZP_TOKEN_FILE"})


def sim_image_id(image: str) -> str:
    """The simulated engine's id of ``image``: one reference, one id (built here: no digest)."""
    return "sha256:" + hashlib.sha256(image.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class AgentTiming:
    """How fast the simulated agents are (seconds).

    Attributes:
        boot_delay: From container start to registration (a real agent takes 5-15 s).
        poll_timeout: Length of one long poll (a SIGTERM ends it at once anyway).
        heartbeat_interval: Between heartbeats while a job runs.
        oom_after: How long a kind ``oom`` job runs before the kernel kills it.
    """

    boot_delay: float = 0.0
    poll_timeout: float = 20.0
    heartbeat_interval: float = 0.25
    oom_after: float = 0.05


class Killed(Exception):  # noqa: N818 - it is a signal, not an error
    """Raised inside the agent thread once its container was killed."""


class SimContainer:
    """One simulated container: its state, output and signals.

    Attributes read by tests: ``token`` (None once the "token file" is deleted),
    ``agent_id``, ``jobs`` (request ids taken), ``exit_code``, ``oom_killed``.
    """

    def __init__(
        self,
        *,
        id: str,  # noqa: A002 - Docker's word
        spec: ContainerSpec,
        token: str,
        broken: bool,
        org: SimOrg,
        on_exit: Callable[[SimContainer], None],
        on_oom: Callable[[SimContainer], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.id = id
        self.clock = clock
        self.spec = spec
        self.name = spec.name
        self.labels = dict(spec.labels)
        self.image = spec.image
        self.hostname = id[:12]
        self.token: str | None = token
        self.broken = broken
        self.org = org
        self.status = "created"
        self.created_at = clock()
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.exit_code: int | None = None
        self.oom_killed = False
        self.destroyed = False
        self.agent_id: int | None = None
        self.jobs: list[int] = []
        self.thread: threading.Thread | None = None
        self.exited = threading.Event()
        self.term = threading.Event()
        self.kill_event = threading.Event()
        self.signal = threading.Event()
        """Set on SIGTERM or SIGKILL: ends a long poll."""
        self._on_exit = on_exit
        self._on_oom = on_oom
        self._call_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._dead = False
        self._logs: deque[str] = deque(maxlen=1000)

    # ------------------------------------------------------------------ state

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self.status == "running"

    @property
    def token_file_present(self) -> bool:
        """Whether the token file still exists (deleted right after registration)."""
        return self.token is not None

    def info(self) -> ContainerInfo:
        """Docker's view of the container."""
        return ContainerInfo(
            id=self.id,
            name=self.name,
            labels=dict(self.labels),
            status=self.status,
            image=self.image,
            started_at=self.started_at,
            exit_code=self.exit_code,
            oom_killed=self.oom_killed,
            image_id=sim_image_id(self.image),
        )

    def log(self, line: str) -> None:
        """Append one output line."""
        self._logs.append(line)

    def tail(self, lines: int) -> list[str]:
        """The last ``lines`` output lines."""
        return list(self._logs)[-lines:] if lines > 0 else []

    def mark_started(self) -> None:
        """Created → running."""
        self.status = "running"
        self.started_at = self.clock()

    # ------------------------------------------------------------------ signals

    def sigterm(self) -> None:
        """Deliver SIGTERM: an idle agent leaves at once, a busy one after its job (silently)."""
        if self.running and not self.term.is_set():
            self.term.set()
            self.signal.set()
            self.org.wake()

    def terminate(self, code: int, *, oom: bool = False) -> None:
        """The process dies now with ``code`` (no offline call, no job report)."""
        self.kill_event.set()
        self.signal.set()
        self.org.wake()
        with self._call_lock:  # let an in-flight organisation call finish first
            self._dead = True
        self._finish(code, oom)

    def exit(self, code: int) -> None:
        """The agent program ends normally with ``code``."""
        with self._call_lock:
            if self._dead:
                return
            self._dead = True
        self._finish(code, False)

    def call(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run one organisation call unless the container was killed (then raise Killed)."""
        with self._call_lock:
            if self._dead:
                raise Killed
            return fn(*args, **kwargs)

    def _finish(self, code: int, oom: bool) -> None:
        with self._state_lock:
            if self.status != "running":
                return
            self.status = "exited"
            self.exit_code = code
            self.oom_killed = oom
            self.finished_at = self.clock()
        if oom:
            self._on_oom(self)
        self._on_exit(self)
        self.exited.set()


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
    c.log("session open: online")
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
    while (remaining := deadline - time.monotonic()) > 0:
        if c.kill_event.wait(min(remaining, timing.heartbeat_interval)):
            raise Killed
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
