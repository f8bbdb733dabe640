"""A roll-out as the operator sees it: the snapshot's `RolloutSnapshot` and a reload's preview.

Pure functions over the engine state (`engine.rollout` holds the rules): the
preview says what `mark_outdated` and the restart's hand-over would do with
each lane, so ``reload --dry-run`` and the reload itself cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpuci_tui.core.engine.lifecycle import EngineState, Intent, LaneRecord, SlotRecord, gate_of
from gpuci_tui.core.engine.rollout.progress import counts, progress_words
from gpuci_tui.core.engine.rollout.state import Phase
from gpuci_tui.core.engine.standby.auto import depth_text
from gpuci_tui.core.models import RolloutSnapshot
from gpuci_tui.core.wording import plural


def rollout_snapshots(state: EngineState, group: str = "") -> tuple[RolloutSnapshot, ...]:
    """The group's roll-out, in progress or the last one (empty: there was none)."""
    rollout = state.rollout
    if rollout is None:
        return ()
    total, new, busy_old = counts(state, rollout)
    return (
        RolloutSnapshot(
            group=group,
            image_from=rollout.image_from,
            image_to=rollout.image_to,
            state=rollout.phase.value,
            slots_total=total,
            slots_new=new,
            busy_old=busy_old,
            canary_slots=tuple(sorted(rollout.canary)),
            successes=rollout.successes,
            needed=rollout.needed,
            reason=rollout.reason,
            started_at=rollout.started_at,
        ),
    )


def slot_ranges(numbers: Iterable[int]) -> str:
    """``0-3, 5``: slot numbers as ranges."""
    ordered = sorted(set(numbers))
    parts: list[str] = []
    start = prev = None
    for number in [*ordered, None]:
        if number is not None and prev is not None and number == prev + 1:
            prev = number
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = number
    return ", ".join(parts)


def preview_lines(before: EngineState, after: EngineState) -> tuple[str, ...]:
    """What going from ``before`` to ``after`` (a reconfigured state) does to the slots."""
    lines: list[str] = []
    if after.desired != before.desired:
        lines.append(f"count: {before.desired} -> {plural(after.desired, 'slot')}")
    if after.standby != before.standby or (after.auto is None) != (before.auto is None):
        depth = depth_text(after)
        lines.append(f"standby: {'on' if depth == '1' else depth}")
    rollout = after.rollout
    if rollout is not None and rollout is not before.rollout:
        lines.extend(_change_lines(after))
    elif (
        rollout is not None and rollout.phase is Phase.ROLLED_BACK and after.spec == rollout.to_spec
    ):
        lines.append(
            f"{rollout.image_to} stays rolled back ({rollout.reason}): the slots keep "
            f"{rollout.image_from}; name another image to try again"
        )
    elif after.spec != before.spec:
        lines.append(
            "agent spec back to the one every slot runs: slots on the abandoned one go back"
        )
        lines.extend(_lane_lines(after, list(after.slots)))
    return tuple(lines)


def _change_lines(state: EngineState) -> list[str]:
    rollout = state.rollout
    assert rollout is not None  # noqa: S101 - only called with one
    change = (
        f"image {rollout.image_from} -> {rollout.image_to}"
        if rollout.image_from != rollout.image_to
        else "agent spec changes (volumes, env, memory limit, ...), image stays"
    )
    lines = [change]
    if rollout.phase is Phase.CANARY:
        canaries = slot_ranges(rollout.canary)
        rest = len(state.slots) - len(rollout.canary)
        lines.append(
            f"canary slots {canaries} first; the other {plural(rest, 'slot')} after "
            f"{plural(rollout.needed, 'successful job')} there; rolled back if a canary "
            "crash-loops or parks"
        )
    slots = [s for s in state.slots if state.target_spec(s.number) == rollout.to_spec]
    lines.extend(_lane_lines(state, slots))
    return lines


def _lane_lines(state: EngineState, slots: list[SlotRecord]) -> list[str]:
    """One line per kind of slot: which lanes are replaced when (the hand-over's order)."""
    now: list[int] = []
    waiting: list[int] = []
    standby = active = busy = 0
    for slot in slots:
        outdated = [lane for lane in slot.lanes if state.outdated(slot.number, lane)]
        if not outdated:
            continue
        if slot.parked or slot.intent not in (Intent.RUN, Intent.RESTART) or state.paused:
            waiting.append(slot.number)
            continue
        if gate_of(state, slot).closed:
            waiting.append(slot.number)
            continue
        now.append(slot.number)
        for lane in outdated:
            kind = _kind(lane)
            standby += kind == "standby"
            active += kind == "active"
            busy += kind == "busy"
    lines = []
    if now:
        parts = []
        if standby:
            parts.append(f"{plural(standby, 'standby lane')} replaced now")
        if active:
            how = "after the hand-over" if state.standby else "now (no standby: a short gap)"
            parts.append(f"{plural(active, 'idle active lane')} {how}")
        if busy:
            parts.append(f"{plural(busy, 'busy lane')} after its job")
        label = "slot" if len(now) == 1 else "slots"
        lines.append(f"{label} {slot_ranges(now)}: {', '.join(parts)}")
    if waiting:
        lines.append(
            f"slots {slot_ranges(waiting)}: parked, held, paused or draining: "
            "replaced when they run again"
        )
    if not lines:
        lines.append("no running container to replace: new containers start on the new spec")
    return lines


def _kind(lane: LaneRecord) -> str:
    if lane.job is not None:
        return "busy"
    if lane.disabled_idle:
        return "standby"
    return "active"


def describe(state: EngineState) -> str:
    """The roll-out in one line for events and answers (empty: none)."""
    rollout = state.rollout
    if rollout is None:
        return ""
    if rollout.phase is Phase.ROLLED_BACK:
        return f"image {rollout.image_to} rolled back to {rollout.image_from}: {rollout.reason}"
    text = progress_words(state, rollout)
    if rollout.phase is Phase.CANARY:
        slots = ", ".join(map(str, sorted(rollout.canary)))
        text += f" (canary slots {slots}: {rollout.successes}/{rollout.needed} jobs)"
    return text
