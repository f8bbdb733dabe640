"""The operator's commands as pure changes of intent, and the intent kept across restarts.

`apply_command(state, command, at=...)` returns the new `EngineState` and the
`CommandResult` to show; it only changes intents and counters, and records when
an override of the file was made (`engine.overrides`). What the change means for
containers and registrations is the planner's business, on the loop's next turn.
`reset_overrides` drops the overrides: the group runs the file again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from gpuci_tui.core.command_types import (
    Command,
    CommandResult,
    Drain,
    GpuClear,
    Pause,
    Prune,
    Restart,
    Resume,
    Scale,
    Stop,
    Unpause,
)
from gpuci_tui.core.engine.gpu_health import NO_GPU_WATCH
from gpuci_tui.core.engine.lifecycle import EngineState, Intent, SlotRecord, new_slot
from gpuci_tui.core.engine.overrides import (
    Overrides,
    override_data,
    restored_overrides,
    runtime_overrides,
    stamped,
)
from gpuci_tui.core.engine.rollout.state import Rollout, rollout_data, rollout_from
from gpuci_tui.core.engine.snapshots import primary
from gpuci_tui.core.models import MAX_SLOTS, RuntimeOverride
from gpuci_tui.core.wording import plural


def refusal(command: Command, numbers: Sequence[int]) -> str | None:
    """Why ``command`` is refused where slots ``numbers`` exist (None: it is accepted).

    The one statement of these rules: `apply_command` refuses with it, and
    `preview.preview` answers with it before anything is sent.
    """
    if isinstance(command, Drain | Resume | Restart) and command.slots is not None:
        unknown = [n for n in command.slots if n not in numbers]
        if unknown:
            valid = ", ".join(map(str, numbers)) or "none"
            return f"no such slot: {', '.join(map(str, unknown))} (slots are {valid})"
    if isinstance(command, Scale) and not 1 <= command.count <= MAX_SLOTS:
        return f"scale: count must be from 1 to {MAX_SLOTS}, got {command.count}"
    return None


def apply_command(
    state: EngineState, command: Command, at: float | None = None
) -> tuple[EngineState, CommandResult]:
    """Carry out ``command`` on the intents; say what it does.

    ``at``: when the operator gave it; a scale, pause or drain is then recorded as an
    override of the file (None: the engine's own use, e.g. a reload's new count).
    """
    state, result = _apply(state, command)
    if at is not None and result.ok:
        # A stop that drains names no slot: it drains them all.
        targets = [s.number for s in state.slots] if isinstance(command, Stop) else result.affected
        state = replace(state, overrides=stamped(state.overrides, command, at, targets))
    return state, result


def _apply(state: EngineState, command: Command) -> tuple[EngineState, CommandResult]:
    problem = refusal(command, [s.number for s in state.slots])
    if problem is not None:
        return state, CommandResult(False, problem)
    if isinstance(command, Drain | Resume | Restart):
        targets = _targets(state, command.slots)
        if isinstance(command, Drain):
            return drain(state, targets)
        if isinstance(command, Resume):
            for slot in targets:
                state = state.with_slot(resumed(slot))
            return state, CommandResult(True, f"resumed {_names(targets)}", _nums(targets))
        return _restart(state, targets)
    if isinstance(command, Scale):
        return _scale(state, command.count)
    if isinstance(command, Pause):
        return replace(state, paused=True), CommandResult(
            True, "replenishing paused: running agents stay, exited ones are not replaced"
        )
    if isinstance(command, Unpause):
        return replace(state, paused=False), CommandResult(True, "replenishing resumed")
    if isinstance(command, Stop):
        state = replace(state, stopping=True, stop_drain=command.drain)
        if command.drain:
            state, _ = drain(state, list(state.slots))
            return state, CommandResult(True, "draining every agent, then stopping the supervisor")
        return state, CommandResult(True, "supervisor stopping; agents left running")
    if isinstance(command, GpuClear):
        # Not an intent: the daemon's GPU watch holds the faults (see `gpu_gates`).
        return state, CommandResult(False, NO_GPU_WATCH)
    if isinstance(command, Prune):
        # Not an intent: the daemon's stale watch removes registrations (`host.stale_watch`).
        return state, CommandResult(False, "prune is carried out by the daemon, not a group")
    raise AssertionError(f"unhandled command {command!r}")


def reset_overrides(state: EngineState, file_count: int) -> tuple[EngineState, CommandResult]:
    """Drop the operator's overrides: the file's count, replenishing on, drained slots resumed.

    ``file_count``: the count of the configuration the group runs on.
    """
    said = []
    if state.overrides.scaled_at is not None:
        if state.desired != file_count:
            said.append(f"count {state.desired} -> {file_count} (the file's)")
            state, _ = _scale(state, file_count)
        else:
            said.append(f"count {file_count} is the file's again")
    if state.paused:
        state = replace(state, paused=False)
        said.append("replenishing resumed")
    drained = [slot for slot in state.slots if slot.intent is Intent.DRAIN]
    for slot in drained:
        state = state.with_slot(resumed(slot))
    if drained:
        said.append(f"resumed {_names(drained)}")
    state = replace(state, overrides=Overrides())
    if not said:
        return state, CommandResult(True, "no override in force: the group runs the file")
    return state, CommandResult(True, "overrides dropped: " + "; ".join(said), _nums(drained))


def overrides_in_force(
    state: EngineState, file_count: int, group: str = ""
) -> tuple[RuntimeOverride, ...]:
    """The overrides in force, each beside the file's value (``file_count``: its count)."""
    return runtime_overrides(
        state.overrides,
        desired=state.desired,
        paused=state.paused,
        drained=[s.number for s in state.slots if s.intent is Intent.DRAIN],
        file_count=file_count,
        group=group,
    )


def resumed(slot: SlotRecord) -> SlotRecord:
    """Undo drain, park, backoff and retire: the slot is filled again."""
    return replace(
        slot,
        intent=Intent.RUN,
        restart_ids=frozenset(),
        parked=False,
        failures=0,
        backoff_until=None,
        message="",
    )


def drain(state: EngineState, targets: list[SlotRecord]) -> tuple[EngineState, CommandResult]:
    """Disable, stop idle agents, let busy ones finish; nothing replaces them."""
    busy = idle = 0
    for slot in targets:
        intent = Intent.RETIRE if slot.intent is Intent.RETIRE else Intent.DRAIN
        if not slot.live:
            slot = replace(slot, intent=intent, restart_ids=frozenset(), backoff_until=None,
                           message="drained")  # fmt: skip
        else:
            has_job = any(lane.job is not None for lane in slot.lanes)
            busy += has_job
            idle += not has_job
            slot = replace(
                slot,
                intent=intent,
                restart_ids=frozenset(),
                message="draining: disabling the agent on the server",
            )
        state = state.with_slot(slot)
    parts = [f"draining {_names(targets)}"]
    if busy:
        parts.append(f"{busy} busy (finish their job first)")
    if idle:
        parts.append(f"{idle} not busy (stopped once disabled and re-checked)")
    return state, CommandResult(True, "; ".join(parts), _nums(targets))


def _restart(state: EngineState, targets: list[SlotRecord]) -> tuple[EngineState, CommandResult]:
    later = now = 0
    for slot in targets:
        if slot.parked or not slot.live:
            slot = resumed(slot)
            now += 1
        else:
            live = frozenset(lane.container_id for lane in slot.lanes if lane.container_id)
            has_job = any(lane.job is not None for lane in slot.lanes)
            later += has_job
            now += not has_job
            message = (
                "restart after the running job"
                if has_job
                else "restarting: disabling, re-checking, then replacing"
            )
            slot = replace(slot, intent=Intent.RESTART, restart_ids=live, message=message)
        state = state.with_slot(slot)
    text = f"restarting {_names(targets)}"
    if later:
        after = "is replaced after its job" if later == 1 else "are replaced after their job"
        text += f"; {plural(later, 'busy agent')} {after}"
    return state, CommandResult(True, text, _nums(targets))


def _scale(state: EngineState, count: int) -> tuple[EngineState, CommandResult]:
    old = state.desired
    state = replace(state, desired=count)
    for number in range(count):
        slot = state.slot(number)
        if slot is None:
            state = state.with_slot(new_slot(state.prefix, number))
        elif slot.intent is Intent.RETIRE:
            state = state.with_slot(resumed(slot))
    retiring = [slot for slot in state.slots if slot.number >= count]
    if retiring:
        retiring = [replace(slot, intent=Intent.RETIRE) for slot in retiring]
        state, _ = drain(state, retiring)
    return state, CommandResult(
        True, f"scaled from {old} to {plural(count, 'slot')}", tuple(range(count))
    )


def _targets(state: EngineState, numbers: tuple[int, ...] | None) -> list[SlotRecord]:
    if numbers is None:
        return list(state.slots)
    return [slot for n in numbers if (slot := state.slot(n)) is not None]


def _names(slots: list[SlotRecord]) -> str:
    if not slots:
        return "no slots"
    return ", ".join(primary(slot).name for slot in slots)


def _nums(slots: list[SlotRecord]) -> tuple[int, ...]:
    return tuple(slot.number for slot in slots)


# --------------------------------------------------------------------------- intent kept on disk


def intent_data(state: EngineState) -> dict[str, Any]:
    """What to keep across a restart of the supervisor: count, pause, drained slots, roll-out,
    and when the overrides among them were made.
    """
    drained = sorted(s.number for s in state.slots if s.intent is Intent.DRAIN)
    data: dict[str, Any] = {"count": state.desired, "paused": state.paused, "drained": drained}
    data.update(override_data(state.overrides))
    if state.rollout is not None:
        data["rollout"] = rollout_data(state.rollout)
    return data


def restore_intent(state: EngineState, data: dict[str, Any]) -> EngineState:
    """Apply what `intent_data` saved (bad values are ignored, never fatal).

    ``state`` is the file's: the saved count wins over its count only when it was a
    scale (a file that says so; an older one: a count other than the file's). A count
    the file changed while the daemon was down is then the file's.
    """
    count = data.get("count")
    if not (isinstance(count, int) and not isinstance(count, bool) and 1 <= count <= MAX_SLOTS):
        count = None
    said = data["scaled_at"] is not None if "scaled_at" in data else count != state.desired
    scaled = count is not None and said
    if count is not None and scaled:
        state = replace(state, desired=count)
    state = replace(state, paused=bool(data.get("paused", False)))
    slots = {n: state.slot(n) or new_slot(state.prefix, n) for n in range(state.desired)}
    drained = []
    for number in data.get("drained", []):
        if isinstance(number, int) and not isinstance(number, bool) and number in slots:
            slots[number] = replace(slots[number], intent=Intent.DRAIN, message="drained")
            drained.append(number)
    overrides = restored_overrides(data, drained=drained)
    if not scaled:
        overrides = replace(overrides, scaled_at=None)
    state = replace(state, slots=tuple(slots[n] for n in sorted(slots)), overrides=overrides)
    return replace(state, rollout=restored_rollout(state, data.get("rollout")))


def restored_rollout(state: EngineState, data: object) -> Rollout | None:
    """The saved roll-out, when the configuration still names the spec it went to.

    So a restarted daemon keeps canarying, or keeps a rolled-back spec rolled back,
    instead of taking the file's spec to every slot at once. A file changed while the
    daemon was down (another spec, or back to the old one) is a new change: the saved
    roll-out is dropped and the slots follow the file.
    """
    rollout = rollout_from(data)
    if rollout is None or not state.spec or rollout.to_spec != state.spec:
        return None
    return rollout
