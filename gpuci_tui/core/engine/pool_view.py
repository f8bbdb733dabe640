"""One read of the pool as the engine sees it: the agents, the queue, and how the read was made.

What the organisation said, not a record of the lifecycle's: the pool observer
builds it (`EngineState.pool`), `transitions.server` folds it into the lanes.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuci_tui.core.protocols import Agent


@dataclass(frozen=True)
class PoolView:
    """One read of the pool: its agents (ours, or every one), by name, at ``began_at``."""

    pool_id: int
    began_at: float
    agents: tuple[Agent, ...] = ()
    queued_jobs: int = 0
    running_jobs: int = 0
    jobs_read_at: float | None = None
    """When ``queued_jobs`` and ``running_jobs`` were read (job requests are read less often)."""
    waiting: tuple[str, ...] = ()
    """Why queued jobs wait when no agent meets their demands (``no agent with …``)."""
    queued_capped: bool = False
    """The job requests read were at the service's cap: ``queued_jobs`` is a lower bound."""
    ours_only: bool = False
    """``agents`` are our lanes' only (the read was narrowed), not every agent of the pool."""

    def agent(self, name: str) -> Agent | None:
        """The agent registered as ``name``, or None."""
        return next((agent for agent in self.agents if agent.name == name), None)
