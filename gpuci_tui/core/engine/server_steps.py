"""The steps between the engine and the organisation: its reads, and our writes and re-reads.

* Observations: a read of the pool (`PoolRead`), of its queue alone (`QueueRead`),
  a read that failed (`PoolUnread`: the organisation refuses our calls), the
  answers to our own calls (`AgentWritten`, `AgentChecked`, `ServerFailed`), and
  whether our identity may manage the pool (`PoolRole`).
* Actions: PATCH a lane's ``enabled`` flag (`SetEnabled`), re-read its agent
  (`CheckAgent`). A read by name is `agent.steps.ReadAgent`.

`steps` puts them into its `Observation` and `Action` unions;
`transitions.server` folds the observations in.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuci_tui.core.engine.lifecycle import Lane
from gpuci_tui.core.engine.pool_view import PoolView
from gpuci_tui.core.protocols import Agent

# =========================================================================== observations


@dataclass(frozen=True)
class PoolRead:
    """A successful read of the pool's agents (ours, or every one), with the queue as last read."""

    view: PoolView


@dataclass(frozen=True)
class PoolUnread:
    """A read of the pool failed (429, 5xx, unreachable): the organisation refuses our calls.

    The pool observer's own backoff holds every other call until ``retry_at``, and
    after it until one of its reads is answered (`PoolObserver.blocked_until`).
    """

    at: float
    retry_at: float
    message: str


@dataclass(frozen=True)
class QueueRead:
    """A read of the job requests alone (the queue), between two reads of the agents."""

    queued_jobs: int
    running_jobs: int
    at: float
    waiting: tuple[str, ...] = ()
    """Why queued jobs wait (as `PoolView.waiting`)."""
    queued_capped: bool = False
    """The answer was at the service's cap: ``queued_jobs`` is a lower bound (as `PoolView`)."""


@dataclass(frozen=True)
class AgentWritten:
    """Our PATCH of a lane's ``enabled`` flag returned ``agent``."""

    slot: int
    lane: Lane
    agent: Agent
    at: float


@dataclass(frozen=True)
class AgentChecked:
    """Our re-read of one lane's agent (None: the registration does not exist)."""

    slot: int
    lane: Lane
    agent: Agent | None
    began_at: float


@dataclass(frozen=True)
class ServerFailed:
    """A server write or re-read for a lane failed; writes wait until ``retry_at``.

    ``gone`` is True when the server said the agent (or the pool) does not exist.
    """

    slot: int
    lane: Lane
    message: str
    retry_at: float
    gone: bool = False


@dataclass(frozen=True)
class PoolRole:
    """Whether the organisation lets our identity manage the pool (read by the pool observer).

    Checked at start, rarely after that, and soon after a registration failed; a
    refusal is the organisation's problem, not a slot's: every start waits (no
    slot counts it towards parking) until a later check finds the role back.
    """

    at: float
    refused: str = ""
    """Why the identity may not register agents, with the fix; empty: it may."""


# =========================================================================== actions


@dataclass(frozen=True)
class SetEnabled:
    """PATCH the lane's agent ``enabled`` flag."""

    slot: int
    lane: Lane
    agent_id: int
    enabled: bool


@dataclass(frozen=True)
class CheckAgent:
    """Re-read the lane's agent (after disabling it: does it hold a job?)."""

    slot: int
    lane: Lane
    agent_id: int
