"""The core's preview of a command: what happens to each slot, before anything is sent."""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.core.command_types import Drain, Pause, Restart, Resume, Scale, Stop
from gpuci_tui.core.engine.preview import CommandPreview, Effect, preview, resumable
from gpuci_tui.core.models import JobInfo, SlotSnapshot, SlotState, SupervisorSnapshot
from gpuci_tui.core.wire import from_dict, to_dict

JOB = JobInfo(request_id=7, pipeline="train", run="1")


def slot(n: int, state: SlotState, **kw: object) -> SlotSnapshot:
    return SlotSnapshot(slot=n, name=f"h-{n}", state=state, **kw)  # type: ignore[arg-type]


SNAP = SupervisorSnapshot(
    taken_at=0.0,
    org_url="https://dev.azure.com/o",
    pool="gpu",
    instance="i",
    desired_count=4,
    slots=(
        slot(0, SlotState.BUSY, job=JOB),
        slot(1, SlotState.IDLE),
        slot(2, SlotState.DRAINED, intent="drain"),
        slot(3, SlotState.PARKED),
    ),
)


def effects(p: CommandPreview) -> dict[int, str]:
    return {e.slot: e.effect for e in p.effects}


def test_drain_all_says_who_finishes_a_job_and_who_stops_now() -> None:
    p = preview(SNAP, Drain(None))
    assert effects(p) == {
        0: Effect.AFTER_JOB,
        1: Effect.STOP_NOW,
        2: Effect.NOT_STARTED,
        3: Effect.NOT_STARTED,
    }
    assert p.of(Effect.AFTER_JOB)[0].job == JOB


def test_restart_replaces_idle_now_busy_after_and_starts_empty() -> None:
    p = preview(SNAP, Restart(None))
    assert effects(p) == {
        0: Effect.AFTER_JOB,
        1: Effect.REPLACE_NOW,
        2: Effect.START_NOW,
        3: Effect.START_NOW,
    }


def test_resume_only_where_there_is_something_to_undo() -> None:
    p = preview(SNAP, Resume(None))
    assert effects(p) == {0: Effect.NOTHING, 1: Effect.NOTHING, 2: Effect.RESUME, 3: Effect.RESUME}
    assert p.of(Effect.NOTHING)[1].reason == "h-1 is idle: nothing to resume"
    assert resumable(SNAP.slots[2]) and not resumable(SNAP.slots[1])
    # Without standby, a disabled agent is something to resume; a standby's disabled
    # registration is not.
    disabled = replace(SNAP.slots[1], agent_enabled=False)
    assert resumable(disabled) and not resumable(replace(disabled, standby="ready"))


def test_scale_down_drains_the_highest_slots() -> None:
    p = preview(SNAP, Scale(2))
    assert effects(p) == {2: Effect.NOT_STARTED, 3: Effect.NOT_STARTED}
    assert effects(preview(SNAP, Scale(1))) == {
        1: Effect.STOP_NOW,
        2: Effect.NOT_STARTED,
        3: Effect.NOT_STARTED,
    }
    bad = preview(SNAP, Scale(0))
    assert not bad.ok and "from 1 to 64" in bad.message


def test_unknown_slot_is_refused_with_the_valid_ones() -> None:
    p = preview(SNAP, Drain((9,)))
    assert not p.ok and p.message == "no such slot: 9 (slots are 0, 1, 2, 3)"


def test_stop_leaves_agents_running_unless_draining() -> None:
    assert effects(preview(SNAP, Stop())) == {
        0: Effect.LEFT_RUNNING,
        1: Effect.LEFT_RUNNING,
        2: Effect.NOTHING,
        3: Effect.NOTHING,
    }
    assert effects(preview(SNAP, Stop(drain=True)))[0] == Effect.AFTER_JOB
    assert preview(SNAP, Pause()).effects == ()


def test_a_preview_travels_as_json() -> None:
    p = preview(SNAP, Drain(None))
    assert from_dict(CommandPreview, to_dict(p)) == p
