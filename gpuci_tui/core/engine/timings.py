"""Durations the engine measures for the metrics: a slot's start-up and the gap between its jobs.

The engine stays pure: it only puts the seconds on the notes it emits anyway
(`Note.seconds`), and the host's metrics record them as histograms
(``gpuci_slot_startup_seconds``, ``gpuci_slot_job_gap_seconds``).

- **Start-up**: from a lane's container start to its agent seen online
  (``agent_online`` note): its own ``Listening for Jobs`` line as it is read
  (`transitions.output`; exact to the follower's latency), else the first pool
  read that shows it online. From a read, measured only when an earlier fact
  about the registration since that start said "not online": an adopted
  container (a daemon restart) started long before anyone looked, and its
  "start-up" would be the daemon's downtime (a replayed line says the same).
- **Next-job gap**: from the exit of a container that ran a job to the
  assignment of the slot's next job (the ``job_assigned`` note of any of its
  lanes), at the server's assignment time when it gives one, else at the read
  that showed the job. Not measured when another lane of the slot already ran a
  job when the first one ended (no gap), nor for the first job after a start.
  It includes the time no job was queued: read it beside the queue depth.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from gpuci_tui.core.engine.lifecycle import LaneRecord, SlotRecord
from gpuci_tui.core.engine.steps import Note

STARTUP_NOTE = "agent_online"
"""The note (and event) kind whose ``seconds`` is a slot's start-up."""
GAP_NOTE = "job_assigned"
"""The note kind whose ``seconds``, when set, is the gap since the slot's previous job."""
#: A line read more than this many seconds after its own timestamp is a replay: it
#: measures no start-up (`said_startup`).
LIVE_LINE = 3.0


def startup_note(before: LaneRecord, after: LaneRecord, slot: int, read_at: float) -> Note | None:
    """The ``agent_online`` note when a read showed the lane's agent online for the first time."""
    started = after.started_at
    if before.online or not after.online or started is None or before.started_at != started:
        return None
    if before.known_at < started:
        return None  # no fact since the start said "offline": adopted, or not measurable
    seconds = max(0.0, read_at - started)
    return Note(
        STARTUP_NOTE,
        f"{after.name} online {seconds:.0f} s after its container started",
        slot,
        agent=after.name,
        seconds=seconds,
    )


def measured_startup(
    before: LaneRecord, after: LaneRecord, slot: int, read_at: float
) -> tuple[LaneRecord, Note | None]:
    """``after`` with its start-up kept when this read measured it, and the note saying so."""
    return _kept(after, startup_note(before, after, slot, read_at))


def said_startup(
    before: LaneRecord, after: LaneRecord, slot: int, stamp: float, at: float
) -> tuple[LaneRecord, Note | None]:
    """As `measured_startup`, for the agent's own ``Listening`` line stamped ``stamp``, read at ``at``.

    A line read more than `LIVE_LINE` seconds after its own timestamp is a replay (the
    follower of an adopted container reads its output from the start): it measures nothing.
    """
    started = before.started_at
    if before.online or started is None or at - stamp > LIVE_LINE:
        return after, None
    seconds = max(0.0, at - started)
    text = f"{after.name} online {seconds:.0f} s after its container started"
    return _kept(after, Note(STARTUP_NOTE, text, slot, agent=after.name, seconds=seconds))


def _kept(lane: LaneRecord, note: Note | None) -> tuple[LaneRecord, Note | None]:
    """The lane with the start-up ``note`` measured kept (the history's ``startup_s``)."""
    if note is None:
        return lane, None
    return replace(lane, startup_s=note.seconds), note


def gap_start(slot: SlotRecord, lane: LaneRecord, took_job: bool, at: float) -> float | None:
    """When the slot's next-job gap starts, as ``lane``'s container exits at ``at``."""
    if not took_job:
        return slot.job_gap_from  # a standby's or a failed start's exit changes nothing
    others = [other for other in slot.lanes if other.lane is not lane.lane]
    if any(other.took_job or other.job is not None for other in others):
        return None  # the next job was already running: no gap
    return at


def with_gap(note: Note, slot: SlotRecord, read_at: float) -> tuple[Note, SlotRecord]:
    """``note`` (a job assigned on ``slot``) with the gap since the slot's previous job."""
    since = slot.job_gap_from
    if since is None or note.kind != GAP_NOTE:
        return note, slot
    lane = next((lane for lane in slot.lanes if lane.name == note.agent), None)
    assigned = _unix(lane.job.assign_time) if lane is not None and lane.job else None
    end = assigned if assigned is not None else read_at
    return replace(note, seconds=max(0.0, end - since)), replace(slot, job_gap_from=None)


def _unix(text: str | None) -> float | None:
    """An Azure DevOps timestamp as Unix time (None when missing or not readable)."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None
