"""A stale agent registration, as the supervisor shows it (console, CLI, control socket).

A leaf module (no imports from the rest of the package) so that `models` can
carry the list in its snapshot and `engine.stale` can build it without a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StaleRegistration:
    """A registration in the pool that carries our marker and backs no container."""

    agent_id: int
    name: str
    status: str
    """``offline`` (an online agent is never stale)."""
    since: str | None
    """When it went offline (``statusChangedOn``), else when it was registered (``createdOn``)."""
    reason: str
    """Why it counts as stale, in words (e.g. "no lane of this instance uses the name")."""
    instance: str = ""
    """The instance its marker names (``GPUCI_INSTANCE``)."""
    offline_seconds: float | None = None
    """How long it has been offline when it was judged (None: the service gave no time)."""
