"""The operator's commands to a supervisor, and its answer: the control protocol's verbs.

Kept apart from `gpuci_tui.core.models` (the state a supervisor shows): the
CLI, the console, the fleet and the control socket send these; the engine
answers them (`core.engine.commands`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "COMMAND_TYPES",
    "Command",
    "CommandResult",
    "Drain",
    "GpuClear",
    "Pause",
    "Prune",
    "Reload",
    "Restart",
    "Resume",
    "Scale",
    "Stop",
    "Unpause",
]


@dataclass(frozen=True)
class Drain:
    """Disable agents on the server, stop idle ones, let busy ones finish; no replacement."""

    slots: tuple[int, ...] | None = None
    """None means every slot."""
    group: str | None = None
    """The agent group of ``slots`` (None: the only group, or every group with no slots)."""


@dataclass(frozen=True)
class Resume:
    """Undo drain/park: re-enable and replenish the slots."""

    slots: tuple[int, ...] | None = None
    group: str | None = None
    """The agent group of ``slots`` (None: the only group, or every group with no slots)."""


@dataclass(frozen=True)
class Restart:
    """Replace idle agents now and busy ones after their job."""

    slots: tuple[int, ...] | None = None
    group: str | None = None
    """The agent group of ``slots`` (None: the only group, or every group with no slots)."""


@dataclass(frozen=True)
class Scale:
    """Change the number of slots. Scaling down drains the highest slots."""

    count: int
    group: str | None = None
    """The agent group to scale (needed when there are several)."""


@dataclass(frozen=True)
class Pause:
    """Stop replenishing: running agents stay, exited ones are not replaced."""


@dataclass(frozen=True)
class Unpause:
    """Start replenishing again."""


@dataclass(frozen=True)
class Stop:
    """Stop the supervisor; agents stay running unless ``drain``."""

    drain: bool = False


@dataclass(frozen=True)
class GpuClear:
    """Clear a GPU's latched faults (Xid, ECC, row remap, lost, driver): its slots take jobs again.

    A condition still there (a pending row remap, a lost GPU) is found again at
    the next sample and quarantines the GPU again.
    """

    gpu: str
    """NVML index, UUID, or ``all``."""


@dataclass(frozen=True)
class Reload:
    """Re-read the configuration file and apply what can change without a restart.

    Lanes whose container no longer matches the new agent spec are replaced
    (standby first, then idle active lanes, busy ones after their job); never a
    killed job. With ``canary`` N slots take the change first and the rest follow
    after ``canary_jobs`` successful jobs there; a canary that crash-loops or parks
    rolls the change back.
    """

    dry_run: bool = False
    """Only say what would change (the answer's message), change nothing."""
    canary: int = 0
    """Slots (per group) that take a new agent spec first; 0: every slot at once."""
    canary_jobs: int | None = None
    """Successful jobs on the canary slots before the rest follow (None: the default)."""
    reset_overrides: bool = False
    """Then drop the operator's overrides (scale, pause, drains): every group runs the file."""


@dataclass(frozen=True)
class Prune:
    """Remove the pool's stale registrations: ours, offline, idle, and backing no lane.

    The rule is `core.engine.stale`; each agent is read again right before its
    DELETE and kept if it is no longer stale (online, busy, taken by a lane).
    """

    dry_run: bool = False
    """Only list them (the answer's message, their ids in ``affected``)."""
    agent_ids: tuple[int, ...] | None = None
    """Only these (what an operator confirmed after a dry run); None: every stale one."""


Command = Drain | Resume | Restart | Scale | Pause | Unpause | Stop | GpuClear | Reload | Prune

COMMAND_TYPES: dict[str, type[Any]] = {
    "drain": Drain,
    "resume": Resume,
    "restart": Restart,
    "scale": Scale,
    "pause": Pause,
    "unpause": Unpause,
    "stop": Stop,
    "gpu_clear": GpuClear,
    "reload": Reload,
    "prune": Prune,
}


@dataclass(frozen=True)
class CommandResult:
    """The supervisor's answer to a command."""

    ok: bool
    message: str
    affected: tuple[int, ...] = ()
