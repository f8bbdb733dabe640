"""One slot's mutable bookkeeping, and the pure rules that judge it.

The supervisor owns `SlotRecord`s and mutates them only on its event loop;
everything that leaves the supervisor is a frozen `SlotSnapshot`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .agent_exit import describe
from .config import SupervisorConfig
from .models import ExitInfo, JobInfo, SlotSnapshot, SlotState
from .protocols import Agent, JobRequest

#: Exit codes of a container ended politely by a signal (SIGINT, SIGTERM). SIGKILL (137)
#: still counts: it is also what a missed OOM kill looks like, and an image that is
#: OOM-killed at every start must back off and park, not restart in a tight loop.
SIGNAL_EXITS = frozenset({130, 143})


@dataclass
class SlotRecord:
    """Everything the supervisor knows about one slot."""

    slot: int
    name: str
    container_id: str | None = None
    started_at: float | None = None
    started_by_us: bool = False
    dying_id: str | None = None
    """A container that died and whose name is taken until its ``destroy``."""
    died_at: float | None = None
    oom: bool = False
    agent: Agent | None = None
    online_confirmed: bool = False
    """The agent was seen online in a poll that began after this container started."""
    job: JobInfo | None = None
    took_job: bool = False
    drain: bool = False
    drained: bool = False
    parked: bool = False
    restart: bool = False
    retire: bool = False
    """Slot above the desired count: drained, then forgotten."""
    stop_requested: bool = False
    disabled_by_us: bool = False
    op: str | None = None
    """The I/O operation in flight for this slot (start / stop / remove), if any."""
    failures: int = 0
    backoff_until: float | None = None
    last_exit: ExitInfo | None = None
    message: str = ""
    jobs_done: int = 0
    last_job: JobInfo | None = None
    last_started_at: float | None = None
    conflict_retries: int = 0
    extra_containers: set[str] = field(default_factory=set)
    """Further containers found for this slot at adoption (never started by us)."""

    # ------------------------------------------------------------------ derived

    @property
    def has_container(self) -> bool:
        """A live container occupies the slot (or is being started)."""
        return self.container_id is not None or self.op == "start"

    @property
    def name_taken(self) -> bool:
        """The container name cannot be reused yet."""
        return self.has_container or self.dying_id is not None or bool(self.extra_containers)

    def state(self, now: float) -> SlotState:
        """The slot's state as shown to operators."""
        if not self.has_container:
            if self.parked:
                return SlotState.PARKED
            if self.drained or (self.drain and self.dying_id is None):
                return SlotState.DRAINED
            if self.drain:
                return SlotState.DRAINING
            if self.backoff_until is not None and self.backoff_until > now:
                return SlotState.BACKOFF
            return SlotState.EMPTY
        if self.drain:
            return SlotState.DRAINING
        if self.job is not None:
            return SlotState.BUSY
        if self.online_confirmed and self.op != "start":
            return SlotState.IDLE
        return SlotState.STARTING

    def snapshot(self, now: float, gpus: tuple[str, ...]) -> SlotSnapshot:
        """Freeze the record."""
        agent = self.agent
        return SlotSnapshot(
            slot=self.slot,
            name=self.name,
            state=self.state(now),
            container_id=self.container_id,
            started_at=self.started_at,
            agent_id=agent.id if agent else None,
            agent_status=agent.status if agent else None,
            agent_enabled=agent.enabled if agent else None,
            job=self.job,
            gpus=gpus,
            last_exit=self.last_exit,
            failures=self.failures,
            backoff_until=self.backoff_until,
            restart_pending=self.restart,
            message=self.message,
            jobs_done=self.jobs_done,
        )

    # ------------------------------------------------------------------ transitions

    def container_started(self, container_id: str, at: float, by_us: bool) -> None:
        """A container now occupies the slot."""
        self.container_id = container_id
        self.started_at = at
        self.started_by_us = by_us
        self.online_confirmed = False
        self.job = None
        self.took_job = False
        self.oom = False
        self.stop_requested = False
        self.conflict_retries = 0

    def exited(
        self, code: int | None, at: float, rules: SupervisorConfig, log_tail: tuple[str, ...] = ()
    ) -> tuple[ExitInfo, bool]:
        """Record the exit of the current container; return it and whether it was a failure.

        A failure is a container that stopped on its own, without taking a job,
        with a non-zero code: a broken image, a bad PAT, a missing token. Those
        back off exponentially and park after ``rules.park_after`` in a row.
        """
        took_job = self.took_job or code == 0
        lifetime = at - self.started_at if self.started_at else 0.0
        if self.stop_requested:
            reason, failure = "stopped by gpuci-tui", False
        elif self.oom:
            reason = "killed by the OOM killer" + (" during its job" if self.took_job else "")
            failure = not self.took_job
        elif code == 0:
            reason, failure = ("job finished" if self.took_job else "exited 0"), False
        elif code is None:
            # Gone while the event stream was down (e.g. dockerd restarted): the slot's
            # image is not to blame, so this is not counted towards parking.
            reason, failure = (
                "gone while the Docker engine was unreachable (exit code unknown)",
                False,
            )
        else:
            reason = f"exit code {code}: {describe(code)}"
            # A signal we did not send (docker stop by someone, dockerd shutting down)
            # says nothing about the image: only the agent's own failures count.
            external_signal = code in SIGNAL_EXITS
            failure = not self.took_job and not external_signal and lifetime < rules.healthy_after
        info = ExitInfo(
            code=code,
            oom=self.oom,
            at=at,
            reason=reason,
            log_tail=log_tail,
            took_job=took_job,
        )
        self.last_exit = info
        if self.took_job:
            self.jobs_done += 1
        self.last_job = self.job
        self.last_started_at = self.started_at
        self.dying_id = self.container_id
        self.died_at = at
        self.container_id = None
        self.started_at = None
        self.job = None
        self.online_confirmed = False
        if failure:
            self._count_failure(f"failed ({reason})", reason, at, rules)
        else:
            self.failures = 0
            self.backoff_until = None
            self.message = ""
        if self.drain:
            self.drained = True
            self.message = "drained"
        if self.restart and not self.drain:
            self.restart = False
        return info, failure

    def start_failed(self, reason: str, at: float, rules: SupervisorConfig) -> None:
        """Count a container that could not even be started as a failure."""
        self.last_exit = ExitInfo(code=None, at=at, reason=f"start failed: {reason}")
        self._count_failure(f"start failed ({reason})", reason, at, rules)

    def _count_failure(self, what: str, reason: str, at: float, rules: SupervisorConfig) -> None:
        """Back off exponentially (capped); park after ``rules.park_after`` in a row."""
        self.failures += 1
        if self.failures >= rules.park_after:
            self.parked = True
            self.backoff_until = None
            self.message = f"parked after {self.failures} failed starts: {reason}"
            return
        delay = min(rules.backoff_base * 2 ** (self.failures - 1), rules.backoff_max)
        self.backoff_until = at + delay
        self.message = f"{what}; next start in {delay:.0f} s"

    def resume(self) -> None:
        """Clear drain, park and backoff so the slot is filled again."""
        self.drain = False
        self.drained = False
        self.parked = False
        self.retire = False
        self.failures = 0
        self.backoff_until = None
        self.message = ""


def job_info(request: JobRequest) -> JobInfo:
    """The console's view of a job request."""
    return JobInfo(
        request_id=request.request_id,
        pipeline=request.definition_name,
        run=request.owner_name,
        definition_id=request.definition_id,
        assign_time=request.assign_time,
        result=request.result,
    )
