"""A start held back because the lane's image could not be pulled (pure).

The image puller (`host.image_puller`) answers a start whose image is absent
and could not be pulled with `StartFailed` of kind ``pull``. A registry outage or
a missing ``docker login`` is not the slot's fault: the lane waits `PULL_RETRY`
seconds and tries again, never counted towards parking (a pull that fails for
an hour must not park every slot; with the image present the start goes on and
this is never reached).
"""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.core.engine.lifecycle import EngineState, LaneRecord, SlotRecord
from gpuci_tui.core.engine.steps import Note, StartFailed

#: A lane whose image could not be pulled tries again after this many seconds.
PULL_RETRY = 30.0


def pull_failed(
    state: EngineState, slot: SlotRecord, lane: LaneRecord, obs: StartFailed
) -> tuple[EngineState, tuple[Note, ...]]:
    """The lane waits for its image and tries again; a note only when the reason changes.

    One note per slot per reason, not one per retry: a long outage stays readable.
    """
    lane = replace(lane, retry_at=obs.at + PULL_RETRY)
    message = f"waiting for the image: {obs.reason}"
    notes: tuple[Note, ...] = ()
    if slot.message != message:
        notes = (Note("image_wait", f"{lane.name}: {obs.reason}", slot.number, agent=lane.name),)
    return state.with_slot(replace(slot.with_lane(lane), message=message)), notes
