"""The engine's own settings: the ``[supervisor]`` table of ``config.toml``.

They are the rules the transitions apply (backoff, parking, what counts as an
early failure), so they live with the engine; `config.loader` reads and writes
the table but the engine never imports the configuration package.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SupervisorConfig:
    """``[supervisor]`` (optional; the defaults suit most hosts)."""

    poll_interval: float = 10.0
    """Seconds between agent-list calls to Azure DevOps (one call per cycle, never per slot)."""
    backoff_base: float = 2.0
    """First delay after an early failure; doubles per consecutive failure."""
    backoff_max: float = 60.0
    park_after: int = 5
    """Consecutive early failures after which a slot is parked."""
    healthy_after: float = 30.0
    """A container that lived this long (or took a job) did not fail early."""
    stop_timeout: float = 30.0
    """Seconds between SIGTERM and SIGKILL when stopping an idle agent."""
    role_retry: float = 60.0
    """Seconds between checks of the pool's Administrator role while the organisation
    refuses it to our identity (agent starts wait meanwhile; one GET per check)."""
    update_retry: float = 30.0
    """Seconds before the next start after an agent that had its chance at the cached
    agent package left to update again (no verified package to give it): never a failure,
    but no registration storm either."""
    canary_jobs: int = 3
    """``reload --canary N``: successful jobs on the canary slots before every slot follows
    (the default when the command gives no ``--canary-jobs``)."""
