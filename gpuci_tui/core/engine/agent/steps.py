"""The steps of the host's own facts about its agents: their output lines and the start gate.

* `AgentSaid` (observation): a line of a container's output stated a fact
  (`agent.output`); the host follows every live container of ours.
* `GiveGo` (action) / `GoGiven` (its answer): the go file that lets a gated
  container's start.sh run the agent (``run.sh``) after it registered.
* `ReadAgent` (action): read one agent by its name (``agentName=``), when the
  engine needs a fact only the organisation has (a new registration's id); the
  answer is an `AgentChecked`.

`engine.steps` puts them into its `Observation` and `Action` unions.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuci_tui.core.engine.agent.output import AgentFact
from gpuci_tui.core.engine.lifecycle import Lane


@dataclass(frozen=True)
class AgentSaid:
    """A container of ``lane`` printed a line that states ``fact`` (a hint, never proof)."""

    slot: int
    lane: Lane
    container_id: str
    fact: AgentFact
    at: float
    """When the line was read (the host's clock; the fact carries the line's own time)."""


@dataclass(frozen=True)
class GoGiven:
    """Our go file reached the container (``error``: why it could not be written)."""

    slot: int
    lane: Lane
    container_id: str
    at: float
    error: str | None = None


@dataclass(frozen=True)
class GiveGo:
    """Put the go file into the lane's gated container: its agent may start (``run.sh``)."""

    slot: int
    lane: Lane
    container_id: str


@dataclass(frozen=True)
class ReadAgent:
    """Read the agent registered as ``name`` (one agent, by name); answered by `AgentChecked`."""

    slot: int
    lane: Lane
    name: str
