"""What a slot that has waited a minute or more is waiting for, when nothing else says it.

Every wait of a slot has its words where it begins: a backoff, an image that
cannot be pulled, a name another container holds (`transitions.name_taken`), a
gate, the organisation, the PAT, the Docker engine, a write to Azure DevOps.
Two waits have none, because they are normally short: an agent coming online
after its container started, and a dead container being removed so that its
name is free. `long_wait` words those once they pass `LONG_WAIT`, so that no
slot waits silently (the snapshot shows it when the slot has no message).
"""

from __future__ import annotations

from gpuci_tui.core.engine.lifecycle import LanePhase, SlotRecord
from gpuci_tui.core.engine.transitions.name_taken import LONG_WAIT


def long_wait(slot: SlotRecord, now: float) -> str:
    """Words for the longest of the slot's silent waits past `LONG_WAIT`; empty: none."""
    found: list[tuple[float, str]] = []
    for lane in slot.lanes:
        if lane.dying_id is not None and lane.died_at is not None:
            found.append(
                (
                    now - lane.died_at,
                    f"waiting {now - lane.died_at:.0f} s for the dead container "
                    f"{lane.dying_id[:12]} to be removed (it holds the name {lane.name}); "
                    f"if it stays, remove it: docker rm -f {lane.name}",
                )
            )
        if lane.live and lane.phase is LanePhase.BOOTING and lane.started_at is not None:
            known = f" (registered as agent {lane.agent_id})" if lane.agent_id is not None else ""
            found.append(
                (
                    now - lane.started_at,
                    f"{lane.name} started {now - lane.started_at:.0f} s ago and its agent is not "
                    f"online yet{known}; its log says why: docker logs {lane.name}",
                )
            )
    waited, words = max(found, default=(0.0, ""))
    return words if waited >= LONG_WAIT else ""
