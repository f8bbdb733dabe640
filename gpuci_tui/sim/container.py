"""A simulated agent container: its state, its output and the signals it gets.

`SimulatedRuntime` makes one per started container; `agent_program.run_agent`
runs in its thread. The output is kept as Docker keeps a container's log (the
last `LOG_LINES` lines here), and can be followed line by line as it comes
(`follow`), as ``docker logs --follow`` does.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

from gpuci_tui.core.protocols import ContainerInfo, ContainerSpec
from gpuci_tui.sim.org import SimOrg

P = ParamSpec("P")
R = TypeVar("R")

#: Output lines a container keeps (older ones are gone, as when Docker's log rotates).
LOG_LINES = 1000


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
        self._logs: deque[str] = deque(maxlen=LOG_LINES)
        self._logged = 0
        """Lines ever logged (the first kept one is number ``_logged - len(_logs)``)."""
        self._output = threading.Condition()
        self.files: dict[str, str] = {}
        """Files written into it after its start (`put_file`), by path."""
        self.files_changed = threading.Event()
        """Set whenever a file is written (the gated agent waits on it)."""

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
        """Append one output line (followers are woken)."""
        with self._output:
            self._logs.append(line)
            self._logged += 1
            self._output.notify_all()

    def tail(self, lines: int) -> list[str]:
        """The last ``lines`` output lines."""
        with self._output:
            return list(self._logs)[-lines:] if lines > 0 else []

    def follow(self, stop: threading.Event, poll: float = 0.2) -> Iterator[str]:
        """Its output lines from the first kept one, as they come, until it ended or ``stop``."""
        seen = 0
        while not stop.is_set():
            with self._output:
                first = self._logged - len(self._logs)
                if seen < first:
                    seen = first  # rotated away before this follower read them
                fresh = list(self._logs)[seen - first :]
                if not fresh:
                    if self.exited.is_set():
                        return
                    self._output.wait(poll)
                    continue
                seen += len(fresh)
            yield from fresh

    def put_file(self, path: str, content: str) -> None:
        """Write a file into the running container (the daemon's go file)."""
        self.files[path] = content
        self.files_changed.set()

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
        with self._output:
            self._output.notify_all()
