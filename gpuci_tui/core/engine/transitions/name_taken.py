"""Transitions: a start finds the lane's container name taken (pure).

By a container of ours (this instance's labels: one still being removed, or a
leftover the next listing brings), the start is retried soon, then ever slower
(at most every `OWN_RETRY_MAX` s), as the removal goes on by itself. By a
container that is not ours (another gpuci-tui instance with the same name
prefix, or one nobody labelled), nothing here removes it: the slot says what
holds the name, who made it and the fix, an event says it once, and the start
is tried again every poll (``poll_interval``), so the slot serves as soon as
the name is free. A wait for a name of ours that lasts `LONG_WAIT` seconds says
what holds it, too.
"""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.core.engine.lifecycle import EngineState, LaneRecord, SlotRecord
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.engine.steps import NameHolder, Note, StartFailed

#: The slowest retry of a start whose name a container of ours still holds.
OWN_RETRY_MAX = 2.0
#: A slot that waits this long for anything says what and why (see `engine.waits`).
LONG_WAIT = 60.0


def name_taken(
    state: EngineState,
    slot: SlotRecord,
    lane: LaneRecord,
    obs: StartFailed,
    rules: SupervisorConfig,
) -> tuple[EngineState, tuple[Note, ...]]:
    """The lane's start met a name conflict: wait for ours, name anyone else's."""
    since = lane.conflict_since if lane.conflict_since is not None else obs.at
    retries = lane.conflict_retries + 1
    holder = obs.holder
    reported = lane.name_holder
    lane = replace(lane, conflict_retries=retries, conflict_since=since)
    if holder is not None and not holder.ours:
        lane = replace(lane, retry_at=obs.at + rules.poll_interval, name_holder=holder.container_id)
        problem = foreign_holder(lane.name, holder)
        slot = replace(slot.with_lane(lane), message=problem)
        if reported == holder.container_id:
            return state.with_slot(slot), ()  # said once: the slot's message keeps saying it
        note = Note("name_taken", f"{lane.name}: {problem}", slot.number, agent=lane.name)
        return state.with_slot(slot), (note,)
    lane = replace(lane, retry_at=obs.at + min(0.1 * retries, OWN_RETRY_MAX), name_holder=None)
    message = "waiting for the previous container's name to be released"
    if obs.at - since >= LONG_WAIT:
        message = own_holder_wait(lane.name, holder, obs.at - since)
    return state.with_slot(replace(slot.with_lane(lane), message=message)), ()


def foreign_holder(name: str, holder: NameHolder) -> str:
    """What holds ``name`` (not ours), who made it, and the fix, in one message."""
    what = _described(holder)
    if holder.instance:
        where = f", state directory {holder.state_dir}" if holder.state_dir else ""
        who = f"of another gpuci-tui instance ({holder.instance}{where})"
    else:
        who = "that gpuci-tui did not make (it has no gpuci-tui labels)"
    remove = (
        f"docker rm -f {name} (it is running: make sure nothing needs it)"
        if holder.status in ("running", "restarting", "paused")
        else f"docker rm {name}"
    )
    return (
        f"the container name {name} is taken by {what} {holder.container_id[:12]} {who}; "
        f"this slot starts once it is gone: remove it ({remove}), or give this daemon "
        "another name_prefix"
    )


def own_holder_wait(name: str, holder: NameHolder | None, waited: float) -> str:
    """A wait of ``waited`` seconds for a name a container of ours still holds."""
    held = (
        f": our {_described(holder)} {holder.container_id[:12]} still holds it"
        if holder is not None
        else ""
    )
    return (
        f"waiting {waited:.0f} s for the name {name} to be released{held}; if it stays, "
        f"remove it: docker rm -f {name}"
    )


def _described(holder: NameHolder) -> str:
    if holder.status in ("running", "restarting", "paused"):
        return f"{holder.status} container"
    if holder.status == "created":
        return "container that never started"
    return f"dead container ({holder.status})" if holder.status else "container"
