"""Roll-outs: a new agent spec going through a group's slots, with canaries and rollback.

An agent *spec* is everything a running container cannot change (image,
volumes, memory limit, network, GPUs, ...), named by its fingerprint
(`config.identity.config_hash`, the ``io.gpuci-tui.config`` label of every
container). Each lane records the spec its container runs (`LaneRecord.spec`);
each slot has a *target* spec (`EngineState.target_spec`). A lane whose
container runs another spec than its slot's target is *outdated*, and
`mark_outdated` hands it to the restart's hand-over (the planner's RESTART
rules, not a second one): a standby is replaced at once, an idle active lane
after a fresh standby is ready, a busy one only after its job. So a roll-out
never kills a job and never puts two on a slot.

A `Rollout` says which slots take the new spec: with canaries, only they do
(phase ``canary``) until ``needed`` jobs succeeded there on the new spec; then
every slot (``rolling``), until every slot runs it (``done``). A trial slot
(a canary, or any slot while the new spec has not yet run a job) that
crash-loops on the new spec (`CRASH_LOOP` early failures) or parks after
failing on it, while the slots on the old spec do not fail too, rolls the
change back: every slot's target is the old spec again, the slots the change
parked are resumed, and the reason is kept (``rolled_back``).

`advance` is `transitions.apply` followed by the roll-out's bookkeeping: the
supervisor's loop folds every observation through it.
"""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.core.engine.lifecycle import EngineState, Intent, LanePhase, SlotRecord, gate_of
from gpuci_tui.core.engine.rollout.state import Phase, Rollout
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.engine.steps import (
    Appeared,
    JobEnded,
    Listed,
    Note,
    Observation,
    Output,
    Started,
)
from gpuci_tui.core.engine.transitions.apply import Step, apply

#: Successful jobs on the canary slots before the other slots follow (``canary_jobs``).
DEFAULT_CANARY_JOBS = 3
#: Early failures of one trial slot on the new spec that count as a crash loop.
CRASH_LOOP = 2


# --------------------------------------------------------------------------- starting one


def base_spec(state: EngineState) -> str:
    """The spec a new change starts from (and rolls back to)."""
    return state.spec if state.rollout is None else state.rollout.base


def begin(
    state: EngineState,
    spec: str,
    *,
    image_from: str,
    image_to: str,
    canary: int = 0,
    canary_jobs: int | None = None,
    at: float = 0.0,
) -> tuple[EngineState, Rollout | None]:
    """Make ``spec`` the configured spec; the roll-out that takes the slots there (or None).

    None when nothing changes: the spec is already the configured one (a reload that
    changed something else; after a rollback too: the same spec is not tried again
    until the configuration changes it), or it is the one every slot is known to run
    (a change undone before it went through: the slots on the abandoned spec go back).
    """
    if spec == state.spec or not spec:
        return state, None
    base = base_spec(state)
    if spec == base:
        return replace(state, spec=spec, rollout=None), None
    eligible = [s for s in state.slots if s.intent in (Intent.RUN, Intent.RESTART)]
    # Canaries that can take the change now: not parked, not held, not busy.
    eligible.sort(key=lambda s: (s.parked, gate_of(state, s).closed, _busy(s), s.number))
    chosen = frozenset(s.number for s in eligible[: max(0, canary)])
    needed = (DEFAULT_CANARY_JOBS if canary_jobs is None else max(0, canary_jobs)) if chosen else 0
    rollout = Rollout(
        from_spec=base,
        to_spec=spec,
        image_from=image_from,
        image_to=image_to,
        phase=Phase.CANARY if chosen and needed else Phase.ROLLING,
        canary=chosen,
        needed=needed,
        started_at=at,
    )
    return replace(state, spec=spec, rollout=rollout), rollout


def _busy(slot: SlotRecord) -> bool:
    return any(lane.job is not None for lane in slot.lanes)


# --------------------------------------------------------------------------- the planner's part


def mark_outdated(state: EngineState, slot: SlotRecord) -> SlotRecord:
    """Hand the slot's outdated lanes to the restart's hand-over (see the module docstring).

    Only a slot that can start their replacements now: a parked, paused, held or
    draining slot would lose a ready agent and get none back. A lane marked by a
    roll-out and current again (the change was rolled back) is unmarked; an
    operator's restart is left as it is.
    """
    if slot.intent not in (Intent.RUN, Intent.RESTART) and not slot.spec_ids:
        return slot
    outdated = frozenset(
        lane.container_id
        for lane in slot.lanes
        if lane.container_id is not None and state.outdated(slot.number, lane)
    )
    if not outdated and not slot.spec_ids:
        return slot  # the common case, asked on every plan: nothing to mark or unmark
    can_replace = (
        not slot.parked
        and not state.paused
        and not state.stopping
        and not gate_of(state, slot).closed
        and slot.intent in (Intent.RUN, Intent.RESTART)
    )
    marked = slot.spec_ids & slot.restart_ids
    current = marked - outdated
    adding = outdated - slot.restart_ids if can_replace else frozenset()
    if not current and not adding and marked == slot.spec_ids:
        return slot
    restart_ids = (slot.restart_ids - current) | adding
    intent = slot.intent
    if adding and intent is Intent.RUN:
        intent = Intent.RESTART
    return replace(
        slot, intent=intent, restart_ids=restart_ids, spec_ids=(marked - current) | adding
    )


# --------------------------------------------------------------------------- the loop's part


def advance(state: EngineState, obs: Observation, rules: SupervisorConfig) -> Step:
    """`transitions.apply`, then the lanes' specs and the roll-out's progress."""
    step = apply(state, obs, rules)
    after = _sync_specs(step.state, obs)
    notes: list[Output] = []
    rollout = after.rollout
    if rollout is not None and rollout.active:
        after, notes = _follow(state, after, obs, step.outputs, rollout)
    return Step(after, step.outputs + tuple(notes))


def _sync_specs(state: EngineState, obs: Observation) -> EngineState:
    """Each lane's spec and package: from its start, read back from the listing, empty once gone."""
    specs: dict[str, tuple[str, str]] = {}
    if isinstance(obs, Listed):
        specs = {listed.info.id: (listed.spec, listed.package) for listed in obs.containers}
    elif isinstance(obs, Started | Appeared) and obs.spec:
        specs = {obs.container_id: (obs.spec, obs.package)}
    for slot in state.slots:
        for lane in slot.lanes:
            spec, package = lane.spec, lane.package
            if not lane.live:
                spec, package = "", ""
            elif lane.container_id in specs:
                spec, package = specs[lane.container_id]
            if (spec, package) != (lane.spec, lane.package):
                slot = slot.with_lane(replace(lane, spec=spec, package=package))
                state = state.with_slot(slot)
    return state


def _follow(
    before: EngineState,
    after: EngineState,
    obs: Observation,
    outputs: tuple[Output, ...],
    rollout: Rollout,
) -> tuple[EngineState, list[Output]]:
    """Count successes and failures on the new spec; move the phase on, or roll back."""
    notes: list[Output] = []
    for output in outputs:
        if isinstance(output, JobEnded) and _succeeded(output) and _on_new(before, output, rollout):
            rollout = replace(rollout, successes=rollout.successes + 1)
    failed = _failed_on_new(before, after, obs, rollout)
    if failed is not None:
        rollout = replace(rollout, failures=_bump(rollout.failures, failed.number))
        if _crash_loops(after, rollout, failed):
            return roll_back(after, rollout, _why(failed, rollout))
    if rollout.phase is Phase.CANARY and rollout.successes >= rollout.needed:
        rollout = replace(rollout, phase=Phase.ROLLING)
        notes.append(
            Note("rollout_canary_passed", f"{progress_words(after, rollout)}: canaries passed")
        )
    running = [s for s in after.slots if s.intent in (Intent.RUN, Intent.RESTART)]
    # Done once every running slot runs it (and some slot does: a drained pool proves nothing).
    if (
        rollout.phase is Phase.ROLLING
        and running
        and all(_slot_new(after, slot, rollout) for slot in running)
    ):
        rollout = replace(rollout, phase=Phase.DONE)
        notes.append(Note("rollout_done", f"image {rollout.image_to} on every slot: roll-out done"))
    return replace(after, rollout=rollout), notes


def _succeeded(ended: JobEnded) -> bool:
    return ended.exit.took_job and ended.exit.code == 0 and not ended.exit.oom


def _on_new(before: EngineState, ended: JobEnded, rollout: Rollout) -> bool:
    """The job ran on the new spec, on a slot whose success counts."""
    slot = before.slot(ended.slot)
    if slot is None or slot.lane(ended.lane).spec != rollout.to_spec:
        return False
    return rollout.phase is not Phase.CANARY or ended.slot in rollout.canary


def _failed_on_new(
    before: EngineState, after: EngineState, obs: Observation, rollout: Rollout
) -> SlotRecord | None:
    """The trial slot whose early failure ``obs`` just counted, on the new spec (or None)."""
    number, lane_id = getattr(obs, "slot", None), getattr(obs, "lane", None)
    if not isinstance(number, int) or lane_id is None or not rollout.trial(number):
        return None
    old, new = before.slot(number), after.slot(number)
    if old is None or new is None or new.failures <= old.failures:
        return None
    return new if old.lane(lane_id).spec == rollout.to_spec else None


def _bump(failures: tuple[tuple[int, int], ...], number: int) -> tuple[tuple[int, int], ...]:
    counts = dict(failures)
    counts[number] = counts.get(number, 0) + 1
    return tuple(sorted(counts.items()))


def _crash_loops(state: EngineState, rollout: Rollout, slot: SlotRecord) -> bool:
    """The failures are the new spec's: a crash loop or a park, and the old spec holds up."""
    if rollout.failures_of(slot.number) < CRASH_LOOP and not slot.parked:
        return False
    others = [
        s
        for s in state.slots
        if rollout.target(s.number) == rollout.from_spec and s.intent is not Intent.RETIRE
    ]
    # Every slot on the old spec failing as well: the host or the organisation is at fault.
    return not others or not all(s.failures > 0 or s.parked for s in others)


def _why(slot: SlotRecord, rollout: Rollout) -> str:
    exit_reason = slot.last_exit.reason if slot.last_exit is not None else "failed"
    count = rollout.failures_of(slot.number)
    what = "parked" if slot.parked else "crash-looped"
    return (
        f"slot {slot.number} {what} on {rollout.image_to} ({count} early failures: {exit_reason})"
    )


def roll_back(
    state: EngineState, rollout: Rollout, reason: str
) -> tuple[EngineState, list[Output]]:
    """Every slot back to the old spec; the slots the change parked or backed off resume."""
    rollout = replace(rollout, phase=Phase.ROLLED_BACK, reason=reason)
    state = replace(state, rollout=rollout)
    for number, _ in rollout.failures:
        slot = state.slot(number)
        if slot is not None and slot.intent in (Intent.RUN, Intent.RESTART):
            # Their failures were the new spec's: the old one starts at once.
            slot = replace(
                slot, parked=False, failures=0, backoff_until=None, message=f"rolled back: {reason}"
            )
            state = state.with_slot(slot)
    note = Note(
        "rollout_rolled_back",
        f"image {rollout.image_to} rolled back to {rollout.image_from}: {reason}",
    )
    return state, [note]


# --------------------------------------------------------------------------- counting


def _slot_new(state: EngineState, slot: SlotRecord, rollout: Rollout) -> bool:
    """The slot runs the new spec: an agent on it came online, and no container runs another.

    Online, not merely started: a spec that crash-loops starts containers too. A slot
    that runs nothing on purpose (drained, retiring) is left out of the count.
    """
    if slot.intent not in (Intent.RUN, Intent.RESTART):
        return True
    others = any(lane.live and lane.spec and lane.spec != rollout.to_spec for lane in slot.lanes)
    online = any(
        lane.spec == rollout.to_spec and lane.phase in (LanePhase.READY, LanePhase.BUSY)
        for lane in slot.lanes
    )
    return online and not others


def counts(state: EngineState, rollout: Rollout) -> tuple[int, int, int]:
    """(slots, slots on the new spec, slots busy on another spec), retiring slots left out."""
    slots = [s for s in state.slots if s.intent is not Intent.RETIRE]
    new = sum(_slot_new(state, s, rollout) and any(lane.live for lane in s.lanes) for s in slots)
    busy_old = sum(
        any(lane.job is not None and lane.spec not in ("", rollout.to_spec) for lane in s.lanes)
        for s in slots
    )
    return len(slots), new, busy_old


def progress_words(state: EngineState, rollout: Rollout) -> str:
    """The progress in words: image …:v2 on 3/8 slots, 1 busy on …:v1."""
    total, new, busy_old = counts(state, rollout)
    text = f"image {rollout.image_to} on {new}/{total} slots"
    if busy_old:
        text += f", {busy_old} busy on {rollout.image_from}"
    return text
