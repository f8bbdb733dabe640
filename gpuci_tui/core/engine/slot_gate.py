"""A slot's gate: whether its GPUs (and the image's CUDA) let its agent take the next job.

`transitions.gpu` opens and closes it from GPU readings; the planner disables
the idle agents of a slot whose gate is closed (`lifecycle.gate_of` is the gate
it plans with). Kept apart from the lifecycle's records, which hold one per slot.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuci_tui.core.engine.gpu_admission import GateKind


@dataclass(frozen=True)
class Gate:
    """Whether the slot's GPUs let its agent take the next job (see `transitions_gpu`).

    Closed (held or quarantined), the slot's idle agents are disabled on the
    server and stay registered; a running job is never touched.
    """

    kind: GateKind = GateKind.OPEN
    reason: str = ""
    """Why it is closed, naming the GPU ("GPU 0 used by pid 4242 python, 61 GB, not ours")."""
    code: str = ""
    """Bounded reason label: ``foreign_process`` or a `gpu_health.Fault` value."""
    since: float | None = None
    """When it closed."""
    passing_since: float | None = None
    """Closed, but the GPUs have passed since then (released after the hold-down)."""
    released_at: float | None = None
    """When it last opened (a close soon after means the GPU flaps)."""
    flapping: bool = False
    """Closed again within the hold-down of its last release: the next release waits."""

    @property
    def closed(self) -> bool:
        """The slot takes no new job."""
        return self.kind is not GateKind.OPEN
