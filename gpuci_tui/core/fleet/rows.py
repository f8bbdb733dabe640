"""The fleet overview's rows: pure functions from each host's status and snapshot.

One `HostRow` per host says whether it is reachable, how its agents are
(busy, idle, hot standby, parked, drained), the pool's queue, which GPUs
busy agents hold and how Azure DevOps and Docker are. `fleet_rows` orders
them for an operator: hosts with problems first (unreachable, then errors,
then warnings), then by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from gpuci_tui.core.engine.preview import busy
from gpuci_tui.core.engine.snapshots import daemon_uptime
from gpuci_tui.core.fleet.link import HostStatus, LinkState
from gpuci_tui.core.fleet.ssh_command import down_reason
from gpuci_tui.core.models import HealthState, SlotSnapshot, SlotState, SupervisorSnapshot
from gpuci_tui.core.wording import plural

_BAD_HEALTH = frozenset({HealthState.AUTH_FAILED, HealthState.UNREACHABLE, HealthState.ERROR})
_AZURE_WORDS = {
    HealthState.AUTH_FAILED: "the PAT was rejected",
    HealthState.UNREACHABLE: "Azure DevOps is unreachable",
    HealthState.ERROR: "Azure DevOps answers with errors",
    HealthState.RATE_LIMITED: "Azure DevOps rate-limits the host",
}


class Severity(IntEnum):
    """How much a host needs the operator; lower sorts first."""

    DOWN = 0
    ERROR = 1
    WARNING = 2
    OK = 3


@dataclass(frozen=True)
class HostRow:
    """One line of the fleet overview."""

    label: str
    target: str
    link: LinkState
    severity: Severity
    problems: tuple[str, ...] = ()
    """Plain words, worst first (empty when all is well)."""
    seen: bool = False
    """A snapshot of the host was received (else every count below is unknown)."""
    stale: bool = False
    """The counts come from the last snapshot before the host went down."""
    since: float | None = None
    """When the link went up or down (the link's age, not the daemon's)."""
    retry_at: float | None = None
    """When the next connection attempt starts (down hosts)."""
    daemon_since: float | None = None
    """When the host's daemon started, on this console's clock (`daemon_started`): only
    while the link is up, and None when the daemon does not say."""
    slots: int = 0
    desired: int = 0
    busy: int = 0
    idle: int = 0
    starting: int = 0
    """Agents on their way (a container starting, or about to): not an empty host."""
    standby: int = 0
    """Hot standby agents ready to take over."""
    parked: int = 0
    stale_registrations: int = 0
    """Registrations of this host left in the pool, offline and backing no container
    (`SupervisorSnapshot.stale`; its dashboard's ``x`` lists and removes them)."""
    drained: int = 0
    """Draining or drained slots."""
    queued: int | None = None
    """Jobs waiting in the pool (the pool's figure: shared by hosts of one pool)."""
    queue_read_at: float | None = None
    """When the daemon read ``queued``, on this console's clock (`on_our_clock`)."""
    queued_capped: bool = False
    """``queued`` was read at the service's cap: the queue holds that many or more."""
    calls_per_minute: int | None = None
    """The daemon's calls to the organisation in the last minute (None: it does not say)."""
    gpus_busy: str = ""
    """GPUs held by busy agents: a count, ``all``, or empty when not known."""
    azure: HealthState = HealthState.UNKNOWN
    docker: HealthState = HealthState.UNKNOWN
    pid: int | None = None
    paused: bool = False


def gpus_busy(snapshot: SupervisorSnapshot) -> str:
    """GPUs that busy agents hold, as the snapshot says: ``"2"``, ``"all"`` or ``"0"``."""
    held: set[str] = set()
    for slot in snapshot.slots:
        if busy(slot):
            # ("none",) is the policy's word for "no GPU", not a GPU to count.
            held.update(g for g in slot.gpus if g != "none")
    if "all" in held:
        return "all"
    return str(len(held))


_OUT_OF_SERVICE = frozenset(
    {SlotState.DRAINING, SlotState.DRAINED, SlotState.PARKED, SlotState.HELD, SlotState.QUARANTINED}
)
"""Slot states that take no next job until someone (or the GPU) lets them."""


def starting(slot: SlotSnapshot, *, paused: bool) -> bool:
    """The slot's agent is on its way: its container starts, or one is about to (not paused)."""
    if busy(slot):
        return False
    return slot.state is SlotState.STARTING or (slot.state is SlotState.EMPTY and not paused)


def host_problems(snapshot: SupervisorSnapshot) -> list[tuple[Severity, str]]:
    """What needs attention on a reachable host, most severe first."""
    found: list[tuple[Severity, str]] = []
    azure = snapshot.azure
    if azure.pool_role:  # signed in, but may not register agents
        found.append((Severity.ERROR, f"agent starts wait: {azure.pool_role}"))
    elif azure.state in _AZURE_WORDS:
        level = Severity.ERROR if azure.state in _BAD_HEALTH else Severity.WARNING
        detail = f": {azure.message}" if azure.message else ""
        found.append((level, _AZURE_WORDS[azure.state] + detail))
    if snapshot.docker.state in _BAD_HEALTH:
        detail = f": {snapshot.docker.message}" if snapshot.docker.message else ""
        found.append((Severity.ERROR, "Docker is not usable" + detail))
    parked = [s.name for s in snapshot.slots if s.state is SlotState.PARKED]
    if parked:
        found.append((Severity.ERROR, f"parked after repeated failures: {', '.join(parked)}"))
    backoff = [s.name for s in snapshot.slots if s.state is SlotState.BACKOFF]
    if backoff:
        found.append((Severity.WARNING, f"failing and backing off: {', '.join(backoff)}"))
    queued = snapshot.pool_summary.queued_jobs
    slots = snapshot.slots
    if queued and slots and all(s.state in _OUT_OF_SERVICE for s in slots):
        # A drained host with jobs waiting is not "all well": nothing here will take them.
        found.append(
            (Severity.WARNING, f"{plural(queued, 'job')} queued, but no agent here takes jobs")
        )
    usage = snapshot.azure_usage
    if usage.budget_low:
        found.append(
            (
                Severity.WARNING,
                f"the identity's budget is nearly spent: {usage.rate_limit_remaining:g}/"
                f"{usage.rate_limit_limit:g} left (every host signing in as it shares it)",
            )
        )
    if snapshot.stopping:
        found.append((Severity.WARNING, "the daemon is stopping"))
    if snapshot.paused:
        found.append((Severity.WARNING, "paused: exited agents are not replaced"))
    found.sort(key=lambda item: item[0])
    return found


def daemon_started(snapshot: SupervisorSnapshot, received_at: float | None) -> float | None:
    """When the daemon that sent ``snapshot`` started, on the clock of whoever received it.

    The daemon's uptime is read on its own clock (`daemon_uptime`) and counted back
    from ``received_at``, so a skew between the two hosts' clocks does not enter it
    (only the snapshot's transit, a fraction of a second). None when the daemon's
    start is not known: nothing is shown rather than a wrong figure.
    """
    uptime = daemon_uptime(snapshot)
    if uptime is None or received_at is None:
        return None
    return received_at - uptime


def on_our_clock(
    snapshot: SupervisorSnapshot, then: float | None, received_at: float | None
) -> float | None:
    """``then``, a time on the daemon's clock, on the clock of whoever received ``snapshot``.

    Its age at ``snapshot.taken_at`` is counted back from ``received_at``, as
    `daemon_started` does, so the two hosts' clock skew does not enter it.
    """
    if then is None or received_at is None:
        return None
    return received_at - max(0.0, snapshot.taken_at - then)


def host_row(label: str, target: str, status: HostStatus) -> HostRow:
    """The overview row of one host."""
    snapshot = status.snapshot
    problems: list[tuple[Severity, str]] = []
    if status.state is LinkState.DOWN:
        problems.append((Severity.DOWN, down_reason(status.problem)))
    elif status.state is LinkState.CONNECTING:
        # Until an attempt fails with its cause, or works: never a reason that says nothing.
        problems.append((Severity.WARNING, "reconnecting…" if snapshot else "connecting…"))
    if snapshot is None:
        severity = problems[0][0] if problems else Severity.OK
        return HostRow(
            label,
            target,
            status.state,
            severity,
            tuple(text for _, text in problems),
            since=status.since,
            retry_at=status.retry_at,
        )
    if status.state is LinkState.UP:
        problems += host_problems(snapshot)
    slots = snapshot.slots
    return HostRow(
        label=label,
        target=target,
        link=status.state,
        severity=problems[0][0] if problems else Severity.OK,
        problems=tuple(text for _, text in problems),
        seen=True,
        stale=status.state is not LinkState.UP,
        since=status.since,
        retry_at=status.retry_at,
        daemon_since=daemon_started(snapshot, status.updated_at)
        if status.state is LinkState.UP
        else None,
        slots=len(slots),
        desired=snapshot.desired_count,
        busy=sum(1 for s in slots if busy(s)),
        idle=sum(1 for s in slots if s.state is SlotState.IDLE and not busy(s)),
        starting=sum(1 for s in slots if starting(s, paused=snapshot.paused)),
        standby=sum(1 for s in slots if s.standby == "ready"),
        parked=sum(1 for s in slots if s.state is SlotState.PARKED),
        stale_registrations=len(snapshot.stale),
        drained=sum(1 for s in slots if s.state in (SlotState.DRAINING, SlotState.DRAINED)),
        queued=snapshot.pool_summary.queued_jobs,
        queue_read_at=on_our_clock(snapshot, snapshot.pool_summary.jobs_read_at, status.updated_at),
        queued_capped=snapshot.pool_summary.queued_capped,
        calls_per_minute=snapshot.azure_usage.requests_last_minute
        if snapshot.azure_usage.read_at is not None
        else None,
        gpus_busy=gpus_busy(snapshot),
        azure=snapshot.azure.state,
        docker=snapshot.docker.state,
        pid=snapshot.pid,
        paused=snapshot.paused,
    )


def fleet_rows(hosts: Sequence[tuple[str, str, HostStatus]]) -> list[HostRow]:
    """Rows for ``(label, target, status)`` of every host: problems first, then by name."""
    rows = [host_row(label, target, status) for label, target, status in hosts]
    rows.sort(key=lambda row: (row.severity, row.label.lower(), row.label))
    return rows


@dataclass(frozen=True)
class FleetTotals:
    """The whole fleet in one line."""

    hosts: int
    up: int
    busy: int
    idle: int
    standby: int
    parked: int
    starting: int = 0
    calls_per_minute: int | None = None
    """The reachable hosts' calls to the organisation in the last minute, added up (None:
    no host says): one identity shared by the fleet spends one budget."""


def fleet_totals(rows: Sequence[HostRow]) -> FleetTotals:
    """Sum the reachable hosts' agents (a down host's stale counts are left out)."""
    live = [row for row in rows if row.link is LinkState.UP]
    return FleetTotals(
        hosts=len(rows),
        up=len(live),
        busy=sum(row.busy for row in live),
        idle=sum(row.idle for row in live),
        standby=sum(row.standby for row in live),
        parked=sum(row.parked for row in live),
        starting=sum(row.starting for row in live),
        calls_per_minute=sum(calls)
        if (calls := [r.calls_per_minute for r in live if r.calls_per_minute is not None])
        else None,
    )
