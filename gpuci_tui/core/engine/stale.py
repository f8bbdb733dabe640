"""Which registrations of the pool are stale: ours, and backing no container (pure).

gpuci-tui marks every agent it registers with two environment variables of the
agent container, which the agent reports as system capabilities:
``GPUCI_INSTANCE`` (the instance id: organisation, pool and name prefix) and
``GPUCI_HOST`` (this host's name). A registration is *ours* when its host
marker is this host and its instance is one this daemon runs, or one that no
daemon on this host runs any more: a renamed prefix changes the instance id, so
its leftovers are recognised by the host marker, while the agents of another
daemon running on the same host (another prefix, alive) are left to that
daemon. Another host's marker is never ours, even with our instance id (two
hosts given one prefix in one pool share it).

Ours is not enough to be stale. Never stale: an online agent, a busy one (it has
an assigned request), one without our marker (another host's, or one registered
before markers existed), and one whose name is a current lane's registration,
even while offline (the lane re-registers it with ``--replace``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from gpuci_tui.core.protocols import Agent
from gpuci_tui.core.registrations import StaleRegistration

MARKER_INSTANCE = "GPUCI_INSTANCE"
"""Capability naming the instance that registered the agent."""
MARKER_HOST = "GPUCI_HOST"
"""Capability naming the host whose daemon registered the agent."""

__all__ = [
    "MARKER_HOST", "MARKER_INSTANCE", "Ownership", "Verdict", "due_for_removal",
    "stale_registrations", "verdict",
]  # fmt: skip


@dataclass(frozen=True)
class Ownership:
    """What makes a registration ours.

    Attributes:
        instances: This daemon's instance ids (one per agent group).
        host: This host's name, as the ``GPUCI_HOST`` marker carries it.
        live: Instance ids that another daemon running on this host holds now:
            their registrations are that daemon's to judge, not ours.
    """

    instances: frozenset[str]
    host: str
    live: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Verdict:
    """Whether one registration is stale, and why (or why it is kept)."""

    stale: bool
    why: str


def verdict(agent: Agent, ownership: Ownership, current_names: frozenset[str]) -> Verdict:
    """Judge one registration (the "never" rules come first, so each is always kept).

    Args:
        agent: As listed with ``includeCapabilities`` and ``includeAssignedRequest``.
        ownership: Which markers are ours.
        current_names: The names the current lanes register (every slot, both lanes).
    """
    caps = agent.system_capabilities or {}
    instance = caps.get(MARKER_INSTANCE, "")
    host = caps.get(MARKER_HOST, "")
    if not instance:
        return Verdict(False, "no gpuci-tui marker (another host's, or registered before markers)")
    if host != ownership.host:
        # Even with our instance id: two hosts with one prefix in one pool share an id.
        return Verdict(False, f"not ours: registered by host {host or '(unnamed)'}")
    if agent.status.lower() != "offline":
        return Verdict(False, f"{agent.status}: an online agent is never removed")
    if agent.assigned_request is not None:
        return Verdict(False, "busy: it has a job")
    if agent.name in current_names:
        return Verdict(False, "a current lane's registration (re-registered with --replace)")
    if instance in ownership.instances:
        return Verdict(True, "registered by this instance; no lane uses the name any more")
    if instance in ownership.live:
        return Verdict(False, f"not ours: instance {instance} runs in another daemon on this host")
    return Verdict(True, f"registered on this host by instance {instance} (an earlier name prefix)")


def stale_registrations(
    agents: Iterable[Agent], ownership: Ownership, current_names: frozenset[str], now: float
) -> tuple[StaleRegistration, ...]:
    """The stale registrations among ``agents``, oldest first.

    Args:
        agents: The pool's agents, listed with capabilities.
        ownership: Which markers are ours.
        current_names: The names the current lanes register.
        now: Wall clock (for how long each has been offline).
    """
    found = []
    for agent in agents:
        judged = verdict(agent, ownership, current_names)
        if not judged.stale:
            continue
        since = agent.status_changed_on or agent.created_on
        when = _epoch(since)
        found.append(
            StaleRegistration(
                agent_id=agent.id,
                name=agent.name,
                status=agent.status,
                since=since,
                reason=judged.why,
                instance=(agent.system_capabilities or {}).get(MARKER_INSTANCE, ""),
                offline_seconds=None if when is None else max(0.0, now - when),
            )
        )
    found.sort(key=lambda s: (-(s.offline_seconds or 0.0), s.name))
    return tuple(found)


def _epoch(text: str | None) -> float | None:
    """An Azure DevOps timestamp (``2026-04-14T10:05:30.5033333Z``) in epoch seconds, or None.

    No offset means UTC; the unset date (year 1) and anything unreadable are None.
    """
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if parsed.year <= 1:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def due_for_removal(
    stale: Iterable[StaleRegistration], after: float
) -> tuple[StaleRegistration, ...]:
    """The stale registrations offline longer than ``after`` seconds (``remove_offline_after``).

    One with no known offline time is not due: the rule is "offline longer
    than", and an unknown time proves nothing.
    """
    return tuple(s for s in stale if s.offline_seconds is not None and s.offline_seconds > after)
