"""The two agents of the parity test behind one interface, and what they leave behind.

`EmulatorSide` runs emulator/agent.sh in a real container against a `SimServer`;
`ProgramSide` runs agent_program.py in a `SimulatedRuntime` against the same kind of
`SimOrg`. `outcome` reduces a finished run to what can be compared between them;
`Scenario` and `Run` are what the scenario table is written with.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import docker.errors

from gpuci_tui.core.protocols import ContainerSpec
from gpuci_tui.sim.agent_program import IGNORED_ENV
from gpuci_tui.sim.container import AgentTiming, SimContainer
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.records import AgentStartup
from gpuci_tui.sim.runtime import DEFAULT_IMAGE, SimulatedRuntime
from gpuci_tui.sim.server import SimServer

from .conftest import NO_SCOPE_PAT, PAT, READ_ONLY_PAT, TOKEN_PATH, token_tar, wait_until

POOL_ID = 42
NAME = "parity-agent"
#: Where the gate scenarios' agents wait for the go (AZP_GO_FILE).
GO_FILE = "/run/azp/go"
#: The agent's own timestamp at the start of its lines (compared as a placeholder).
STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ: ")
#: The container's memory limit: an "oom" job must meet the kernel (as in test_emulator).
MEMORY = {"mem_limit": "24m", "memswap_limit": "24m", "oom_score_adj": 1000}


class TracingOrg(SimOrg):
    """A `SimOrg` that records the agent's calls that change what the organisation shows.

    Polls and heartbeats are left out: how many there are depends on timing, and a
    poll the emulator gave up on (SIGTERM) still ends on the server after it left.
    """

    def __init__(self, startup: AgentStartup) -> None:
        super().__init__(heartbeat_timeout=3.0, startup=startup)  # the emulator beats every 1 s
        self.trace: list[str] = []
        self.registered_ids: list[int] = []
        self.add_pat(PAT)
        self.add_pat(READ_ONLY_PAT, scopes=("agentpools",))
        self.add_pat(NO_SCOPE_PAT, scopes=("build",))
        self.add_pool("gpu")

    def _traced(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:
            self.trace.append(f"{what}!{exc.__class__.__name__}")
            raise
        self.trace.append(what)
        return result

    def other_registration(self, hostname: str, online: bool = True) -> tuple[int, str]:
        """Register NAME from another host (``online``: with its session), untraced."""
        return SimOrg.register(self, "gpu", NAME, PAT, hostname, open_session=online)

    def register(self, *args: Any, **kwargs: Any) -> tuple[int, str]:  # type: ignore[override]
        result: tuple[int, str] = self._traced("register", super().register, *args, **kwargs)
        self.registered_ids.append(result[0])
        return result

    def open_session(self, agent_id: int, key: str) -> str:
        result: str = self._traced("open_session", super().open_session, agent_id, key)
        return result

    def finish(self, request_id: int, result: str, session_key: str | None = None) -> bool:
        ok: bool = self._traced(f"finish={result}", super().finish, request_id, result, session_key)
        return ok

    def offline(self, agent_id: int, session_key: str | None = None) -> None:
        self._traced("offline", super().offline, agent_id, session_key)


class Side(Protocol):
    """One agent under test, started once."""

    org: TracingOrg
    url: str

    def start(self, env: Mapping[str, str], token: str) -> None:
        """Start the agent with this environment and token file content."""

    def hostname(self) -> str:
        """The container's host name (the default agent name)."""

    def lines(self) -> list[str]:
        """Everything the agent printed so far, stdout and stderr, in order."""

    def sigterm(self) -> None:
        """Send SIGTERM (docker stop's first step)."""

    def sigkill(self) -> None:
        """Send SIGKILL."""

    def give_go(self) -> None:
        """Put the go file (`GO_FILE`) into the container, as the supervisor does."""

    def wait_exit(self, timeout: float) -> int:
        """The exit code, once the agent has exited."""

    def token_file_present(self) -> bool:
        """Whether the token file is still in the container."""

    def oom_killed(self) -> bool:
        """Whether the kernel killed the container for memory."""

    def settle(self) -> None:
        """Wait until the organisation's port matches its armed faults."""

    def close(self) -> None:
        """Release everything the side started."""


class EmulatorSide:
    """agent.sh in a busybox container, talking HTTP to a `SimServer` on 127.0.0.1."""

    def __init__(self, org: TracingOrg, client: Any, image: str, run_label: str) -> None:
        self.org = org
        self.server = SimServer(org).start()
        self.url = self.server.org_url
        self._client, self._image, self._label = client, image, run_label
        self._c: Any = None

    def start(self, env: Mapping[str, str], token: str) -> None:
        self._c = self._client.containers.create(
            self._image,
            name=f"{NAME}-{self._label}",
            network_mode="host",
            labels={"gpuci.test": self._label},
            environment=dict(env),
            **MEMORY,
        )
        assert self._c.put_archive("/", token_tar(token))
        self._c.start()

    def hostname(self) -> str:
        self._c.reload()
        return str(self._c.attrs["Config"]["Hostname"])

    def lines(self) -> list[str]:
        return str(self._c.logs().decode(errors="replace")).splitlines()

    def sigterm(self) -> None:
        self._c.kill(signal="SIGTERM")

    def sigkill(self) -> None:
        self._c.kill()

    def give_go(self) -> None:
        assert self._c.put_archive("/", token_tar("go\n", GO_FILE))

    def wait_exit(self, timeout: float) -> int:
        return int(self._c.wait(timeout=timeout)["StatusCode"])

    def token_file_present(self) -> bool:
        try:
            self._c.get_archive(TOKEN_PATH)
        except docker.errors.NotFound:
            return False
        return True

    def oom_killed(self) -> bool:
        self._c.reload()
        return bool(self._c.attrs["State"]["OOMKilled"])

    def settle(self) -> None:
        down = self.org.faults.unreachable_now()
        wait_until(lambda: self.server.listening != down, 10, "the port to follow the faults")

    def close(self) -> None:
        self.server.stop()


class ProgramSide:
    """agent_program.py in a `SimulatedRuntime` "container", calling the `SimOrg` directly."""

    def __init__(self, org: TracingOrg) -> None:
        self.org = org
        self.url = "http://127.0.0.1:9/simorg"  # never dialled: the program calls the org
        self.runtime = SimulatedRuntime(
            org, destroy_delay=0.02, timing=AgentTiming(heartbeat_interval=0.25)
        )

    @property
    def _c(self) -> SimContainer:
        return self.runtime.history()[0]

    def start(self, env: Mapping[str, str], token: str) -> None:
        spec = ContainerSpec(
            name=NAME, image=DEFAULT_IMAGE, labels={}, environment=dict(env), token_path=TOKEN_PATH
        )
        self.runtime.start(spec, token)

    def hostname(self) -> str:
        return self._c.hostname

    def lines(self) -> list[str]:
        return self._c.tail(1000)

    def sigterm(self) -> None:
        self._c.sigterm()

    def sigkill(self) -> None:
        self.runtime.kill(self._c.id)

    def give_go(self) -> None:
        self.runtime.put_file(self._c.id, GO_FILE, "go\n")

    def wait_exit(self, timeout: float) -> int:
        assert self._c.exited.wait(timeout), f"the agent did not exit within {timeout} s"
        assert self._c.exit_code is not None
        return self._c.exit_code

    def token_file_present(self) -> bool:
        return self._c.token_file_present

    def oom_killed(self) -> bool:
        return self._c.oom_killed

    def settle(self) -> None:
        """Nothing to wait for: the program reads the faults on every step."""

    def close(self) -> None:
        self.runtime.close()


@dataclass
class Outcome:
    """What one agent left behind, with run-specific values replaced by placeholders."""

    exit_code: int
    lines: list[str]
    calls: list[str]
    token_file_present: bool
    oom_killed: bool
    agent: dict[str, object] | None
    jobs: list[dict[str, object]] = field(default_factory=list)


def outcome(
    side: Side, exit_code: int, env: Mapping[str, str], rids: list[int], old_id: int | None
) -> Outcome:
    """Read what ``side`` left behind once its agent has exited."""
    org = side.org
    agent = next((a for a in org.agents(POOL_ID)), None)
    places = {side.url: "{url}", side.hostname(): "{hostname}"}
    places.update({str(i): "{agent_id}" for i in org.registered_ids})
    agent_view: dict[str, object] | None = None
    if agent is not None:
        caps = agent.capabilities
        agent_view = {
            "name": places.get(agent.name, agent.name),
            "hostname": places.get(agent.hostname, agent.hostname),
            "online": agent.online,
            "registrations": agent.registrations,
            "replaced": old_id is not None and agent.id == old_id,
            "env_not_in_capabilities": sorted(
                k for k, v in env.items() if k not in IGNORED_ENV and caps.get(k) != v
            ),
            "token_capabilities": sorted(k for k in caps if k.startswith("AZP_TOKEN")),
        }
    jobs = []
    for n, rid in enumerate(rids, 1):
        job = org.job(rid)
        places[str(rid)] = f"{{rid{n}}}"
        places[job.run_name] = f"{{run{n}}}"
        jobs.append(
            {
                "state": job.state,
                "result": job.result,
                "assign_count": job.assign_count,
                "by_agent": agent is not None and job.agent_id == agent.id,
            }
        )
    return Outcome(
        exit_code=exit_code,
        lines=[_placeholders(line, places) for line in side.lines()],
        calls=list(org.trace),
        token_file_present=side.token_file_present(),
        oom_killed=side.oom_killed(),
        agent=agent_view,
        jobs=jobs,
    )


def _placeholders(line: str, places: dict[str, str]) -> str:
    line = STAMP.sub("{stamp}: ", line)
    for value in sorted(places, key=len, reverse=True):  # the URL before the numbers in it
        line = re.sub(rf"(?<![\w.]){re.escape(value)}(?![\w])", places[value], line)
    return line


@dataclass
class Run:
    """One agent's run of a scenario: the side and the jobs queued for it."""

    side: Side
    rids: list[int] = field(default_factory=list)
    old_id: int | None = None

    @property
    def org(self) -> TracingOrg:
        """The side's organisation."""
        return self.side.org

    def queue(self, duration: float, kind: Any = "normal") -> int:
        """Queue a job in the pool and remember its id."""
        rid = self.org.queue_job(POOL_ID, duration=duration, kind=kind)
        self.rids.append(rid)
        return rid

    def printed(self, text: str) -> None:
        """Wait until the agent has printed a line containing ``text`` (lines stay)."""
        wait_until(lambda: any(text in line for line in self.side.lines()), 30, repr(text))

    def polling(self) -> None:
        """Wait until the agent is online and in its long poll (it re-polls at once)."""

        def ok() -> bool:
            agent = self.org.find_agent(NAME)
            return agent is not None and agent.online and agent.active_polls == 1

        wait_until(ok, 30, "the agent's long poll")

    def agent_id(self) -> int:
        """The id of the registration called NAME."""
        agent = self.org.find_agent(NAME)
        assert agent is not None
        return agent.id

    def busy(self) -> int:
        """Queue a long job and wait until the agent runs it."""
        rid = self.queue(60.0)
        self.printed(f"job {rid} started")
        return rid

    def abandoned(self) -> bool:
        """Whether the first job was abandoned (lasting)."""
        return self.org.job(self.rids[0]).result == "abandoned"


def _nothing(r: Run) -> object:
    """No step."""
    return None


@dataclass(frozen=True)
class Scenario:
    """Inputs of one scenario and what both agents must do with them.

    Attributes:
        id: Test id.
        exit_code: Both agents' exit code.
        lines: Both agents' whole output, with placeholders.
        calls: Both agents' calls to the organisation (see `TracingOrg`).
        jobs: ``(result, times assigned)`` of each job queued.
        token_kept: Whether the token file is still there at the end.
        env: Changes to the base environment (None removes a variable).
        token: The token file's content.
        startup: The organisation's start-up times.
        before: Set-up before the agent starts.
        drive: Steps after the start (jobs, signals, faults), each waiting for a lasting state.
        after: A lasting state to wait for once the agent has exited.
    """

    id: str
    exit_code: int
    lines: tuple[str, ...]
    calls: tuple[str, ...] = ()
    jobs: tuple[tuple[str | None, int], ...] = ()
    token_kept: bool = False
    env: Mapping[str, str | None] = field(default_factory=dict)
    token: str = PAT
    startup: AgentStartup = AgentStartup()
    before: Callable[[Run], object] = _nothing
    drive: Callable[[Run], object] = _nothing
    after: Callable[[Run], bool] | None = None
