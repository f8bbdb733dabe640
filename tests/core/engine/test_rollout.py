"""Roll-outs as tables on the fake clock: outdated lanes, canaries, rollback (engine.rollout).

A lane whose container runs another agent spec than its slot's target goes
through the restart's hand-over: the standby first, the idle active lane once a
fresh standby is ready, a busy lane only after its job. Canaries take the
change first; a canary that crash-loops on it rolls it back.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpuci_tui.core.docker.agentspec import LABEL_CONFIG, LABEL_LANE, LABEL_SLOT, placed
from gpuci_tui.core.engine.lifecycle import EngineState, Intent, Lane, SlotRecord, new_slot
from gpuci_tui.core.engine.rollout.progress import CRASH_LOOP, advance, begin
from gpuci_tui.core.engine.rollout.state import Phase
from gpuci_tui.core.engine.rollout.views import (
    describe,
    preview_lines,
    rollout_snapshots,
    slot_ranges,
)
from gpuci_tui.core.engine.server_steps import SetEnabled
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.engine.steps import (
    Action,
    Died,
    Listed,
    Note,
    Observation,
    StartAgent,
    Started,
    StartFailed,
    StopAgent,
)
from gpuci_tui.core.protocols import ContainerInfo
from tests.core.lifecycle_helpers import ACTIVE, BUSY, NOW, READ, STANDBY, actions, engine, slot0

A, B = Lane.A, Lane.B
RULES = SupervisorConfig()
OLD, NEW = "spec-v1", "spec-v2"


def on(spec: str, preset: dict[str, Any], container: str | None = None) -> dict[str, Any]:
    """A lane preset whose container runs ``spec``."""
    lane = {**preset, "spec": spec}
    if container is not None:
        lane["container_id"] = container
    return lane


def pool(slots: int, *, busy: tuple[int, ...] = (), spec: str = OLD) -> EngineState:
    """``slots`` slots, each with an active and a standby lane on ``spec``."""
    records = []
    for number in range(slots):
        slot = new_slot("h", number)
        active = BUSY if number in busy else ACTIVE
        a = {**on(spec, active, f"a{number}"), "agent_id": 10 + number}
        b = {**on(spec, STANDBY, f"b{number}"), "agent_id": 20 + number}
        slot = slot.with_lane(replace(slot.lane(A), **a))
        slot = slot.with_lane(replace(slot.lane(B), **b))
        records.append(slot)
    return EngineState("h", slots, tuple(records), pool=READ, spec=spec)


def reload(state: EngineState, canary: int = 0, jobs: int | None = None) -> EngineState:
    new, _ = begin(state, NEW, image_from="ci:v1", image_to="ci:v2", canary=canary,
                   canary_jobs=jobs, at=NOW)  # fmt: skip
    return new


def fold(
    state: EngineState, *observations: Observation, rules: SupervisorConfig = RULES
) -> tuple[EngineState, list[Note]]:
    notes: list[Note] = []
    for obs in observations:
        step = advance(state, obs, rules)
        state = step.state
        notes.extend(
            o for o in step.outputs if isinstance(o, Note) and o.kind.startswith("rollout")
        )
    return state, notes


def slot(state: EngineState, number: int) -> SlotRecord:
    found = state.slot(number)
    assert found is not None
    return found


# ----------------------------------------------------------------------------- outdated lanes

ROWS: list[tuple[str, EngineState, list[Action]]] = [
    ("both lanes outdated, idle: the standby is replaced first, the active serves meanwhile",
     engine(on(OLD, ACTIVE), on(OLD, STANDBY), spec=NEW), [StopAgent(0, B, "cb")]),
    ("the standby runs the new spec, the active is idle on the old: hand over (disable it)",
     engine(on(OLD, ACTIVE), on(NEW, STANDBY), spec=NEW), [SetEnabled(0, A, 1, False)]),
    ("busy on the old spec: disabled, never stopped; the standby is replaced meanwhile",
     engine(on(OLD, BUSY), on(OLD, STANDBY), spec=NEW),
     [SetEnabled(0, A, 1, False), StopAgent(0, B, "cb")]),
    ("a container of unknown spec (no label) is never outdated",
     engine(ACTIVE, STANDBY, spec=NEW), []),
    ("nothing outdated: nothing to do", engine(on(NEW, ACTIVE), on(NEW, STANDBY), spec=NEW), []),
    ("paused: outdated lanes are not taken out (nothing could replace them)",
     engine(on(OLD, ACTIVE), on(OLD, STANDBY), spec=NEW, paused=True), []),
    ("parked: outdated lanes are not taken out",
     engine(on(OLD, ACTIVE), on(OLD, STANDBY), spec=NEW).with_slot(
         replace(new_slot("h", 0), parked=True)), []),
]  # fmt: skip


@pytest.mark.parametrize(("state", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_outdated_lanes_table(state: EngineState, expected: list[Action]) -> None:
    assert actions(state) == expected


def test_the_replacement_starts_on_the_target_spec() -> None:
    state = engine(on(OLD, ACTIVE), {**STANDBY, "container_id": None, "phase": "empty",
                                     "online": False}, spec=NEW)  # fmt: skip
    assert StartAgent(0, B, NEW) in actions(state)


def test_an_outdated_slot_is_restarted_and_the_restart_ends_when_every_lane_is_current() -> None:
    from gpuci_tui.core.engine.planning.planner import decide

    state, _ = decide(engine(on(OLD, ACTIVE), on(OLD, STANDBY), spec=NEW), NOW)
    assert slot0(state).intent is Intent.RESTART
    assert slot0(state).restart_ids == {"ca", "cb"} == slot0(state).spec_ids
    current = engine(on(NEW, ACTIVE), on(NEW, STANDBY), spec=NEW)
    current = current.with_slot(replace(slot0(current), intent=Intent.RESTART,
                                        restart_ids=frozenset({"gone"}), spec_ids=frozenset()))  # fmt: skip
    state, _ = decide(current, NOW)
    assert slot0(state).intent is Intent.RUN


def test_a_lane_current_again_after_a_rollback_is_unmarked_but_an_operator_restart_stays() -> None:
    from gpuci_tui.core.engine.planning.planner import decide

    state = engine(ACTIVE, on(OLD, STANDBY), spec=NEW)  # a: of unknown spec
    state, _ = decide(state, NOW)
    assert slot0(state).restart_ids == {"cb"} == slot0(state).spec_ids
    # The operator restarts the slot; then the change is undone before cb was replaced.
    record = slot0(state)
    state = state.with_slot(replace(record, restart_ids=record.restart_ids | {"ca"},
                                    lanes=(record.lanes[0], replace(record.lanes[1], op=None))))  # fmt: skip
    state = replace(state, spec=OLD)
    state, _ = decide(state, NOW)
    assert slot0(state).restart_ids == {"ca"}
    assert slot0(state).spec_ids == frozenset()


# ----------------------------------------------------------------------------- adoption


def test_the_spec_label_is_read_back_at_adoption() -> None:
    labels = {LABEL_SLOT: "0", LABEL_LANE: "a", LABEL_CONFIG: OLD}
    info = ContainerInfo("c1", "h-0", labels, "running", started_at=5.0)
    unlabelled = ContainerInfo("c2", "h-0-b", {LABEL_SLOT: "0", LABEL_LANE: "b"}, "running")
    state = EngineState("h", 1, (new_slot("h", 0),), spec=NEW)
    state, _ = fold(state, Listed(placed([info, unlabelled]), 6.0))
    assert slot0(state).lane(A).spec == OLD
    assert slot0(state).lane(B).spec == ""
    assert state.outdated(0, slot0(state).lane(A))
    assert not state.outdated(0, slot0(state).lane(B))


def test_a_lane_forgets_its_spec_when_its_container_ends() -> None:
    state = engine(on(OLD, ACTIVE), on(OLD, STANDBY), spec=NEW)
    state, _ = fold(state, Died(0, B, "cb", 143, NOW))
    assert slot0(state).lane(B).spec == ""
    state, _ = fold(state, Started(0, B, "cb2", NOW + 1, spec=NEW))
    assert slot0(state).lane(B).spec == NEW


# ----------------------------------------------------------------------------- canaries


def test_canaries_are_idle_slots_first_and_only_they_change() -> None:
    state = reload(pool(4, busy=(0,)), canary=2, jobs=2)
    rollout = state.rollout
    assert rollout is not None and rollout.phase is Phase.CANARY
    assert rollout.canary == {1, 2}
    assert [state.target_spec(n) for n in range(4)] == [OLD, NEW, NEW, OLD]
    assert [n for n in range(4) for lane in slot(state, n).lanes if state.outdated(n, lane)] == [
        1, 1, 2, 2
    ]  # fmt: skip


def test_canary_jobs_on_the_new_spec_let_the_rest_follow() -> None:
    state = reload(pool(3), canary=1, jobs=2)
    canary = min(state.rollout.canary) if state.rollout else -1
    assert canary == 0
    # A job succeeds on the canary on the new spec (its lane was replaced).
    busy_new = {**on(NEW, BUSY, "n1"), "agent_id": 10}
    state = state.with_slot(slot(state, 0).with_lane(replace(slot(state, 0).lane(A), **busy_new)))
    state, notes = fold(state, Died(0, A, "n1", 0, NOW))
    assert state.rollout is not None and state.rollout.successes == 1
    assert state.rollout.phase is Phase.CANARY and notes == []
    # A job on a non-canary slot (old spec) does not count.
    busy_old = {**on(OLD, BUSY, "o1"), "agent_id": 11}
    state = state.with_slot(slot(state, 1).with_lane(replace(slot(state, 1).lane(A), **busy_old)))
    state, _ = fold(state, Died(1, A, "o1", 0, NOW))
    assert state.rollout.successes == 1
    busy_new = {**on(NEW, BUSY, "n2"), "agent_id": 10}
    state = state.with_slot(slot(state, 0).with_lane(replace(slot(state, 0).lane(A), **busy_new)))
    state, notes = fold(state, Died(0, A, "n2", 0, NOW + 1))
    assert state.rollout.phase is Phase.ROLLING
    assert [n.kind for n in notes] == ["rollout_canary_passed"]
    assert [state.target_spec(n) for n in range(3)] == [NEW, NEW, NEW]


def test_the_roll_out_is_done_when_every_slot_runs_the_new_spec() -> None:
    state = reload(pool(2))
    assert state.rollout is not None and state.rollout.phase is Phase.ROLLING
    for number in range(2):
        record = slot(state, number)
        for lane in record.lanes:
            record = record.with_lane(replace(lane, spec=NEW))
        state = state.with_slot(record)
    state, notes = fold(state, Started(0, A, "a0", NOW))  # any observation moves it on
    assert state.rollout.phase is Phase.DONE
    assert [n.kind for n in notes] == ["rollout_done"]


# ----------------------------------------------------------------------------- rollback


def crash(
    state: EngineState, number: int, times: int, at: float = NOW
) -> tuple[EngineState, list[Note]]:
    """Slot ``number``'s lane a fails to start ``times`` times on the new spec."""
    notes: list[Note] = []
    for i in range(times):
        record = slot(state, number)
        lane = replace(record.lane(A), container_id=None, phase="starting", op="start", spec=NEW)
        state = state.with_slot(replace(record.with_lane(lane), backoff_until=None))
        state, more = fold(state, StartFailed(number, A, "start", "exec format error", at + i))
        notes.extend(more)
    return state, notes


def test_a_canary_that_crash_loops_rolls_the_change_back() -> None:
    state = reload(pool(3), canary=1)
    state, notes = crash(state, 0, CRASH_LOOP - 1)
    assert state.rollout is not None and state.rollout.phase is Phase.CANARY and notes == []
    state, notes = crash(state, 0, 1, NOW + 5)
    rollout = state.rollout
    assert rollout.phase is Phase.ROLLED_BACK
    assert [n.kind for n in notes] == ["rollout_rolled_back"]
    assert "slot 0 crash-looped on ci:v2" in (rollout.reason or "")
    assert "exec format error" in (rollout.reason or "")
    # Every slot's target is the old spec again; the canary's failures are forgiven.
    assert [state.target_spec(n) for n in range(3)] == [OLD, OLD, OLD]
    assert slot(state, 0).failures == 0 and slot(state, 0).backoff_until is None
    assert "rolled back" in describe(state)


def test_a_canary_that_parks_is_rolled_back_and_resumed() -> None:
    rules = SupervisorConfig(park_after=1)
    state = reload(pool(2), canary=1)
    record = slot(state, 0)
    lane = replace(record.lane(A), container_id=None, phase="starting", op="start", spec=NEW)
    state = state.with_slot(record.with_lane(lane))
    state, notes = fold(state, StartFailed(0, A, "start", "no such image", NOW), rules=rules)
    assert state.rollout is not None and state.rollout.phase is Phase.ROLLED_BACK
    assert not slot(state, 0).parked
    assert "slot 0 parked on ci:v2" in (state.rollout.reason or "")


def test_failures_everywhere_are_not_the_new_spec_s_fault() -> None:
    state = reload(pool(2), canary=1)
    state = state.with_slot(replace(slot(state, 1), failures=2))  # the old spec fails too
    state, notes = crash(state, 0, CRASH_LOOP + 1)
    assert state.rollout is not None and state.rollout.phase is Phase.CANARY and notes == []


def test_a_failure_on_the_old_spec_of_a_canary_does_not_count() -> None:
    state = reload(pool(2), canary=1)
    for i in range(3):
        record = slot(state, 0)
        lane = replace(record.lane(A), container_id=None, phase="starting", op="start", spec=OLD)
        state = state.with_slot(replace(record.with_lane(lane), backoff_until=None))
        state, _ = fold(state, StartFailed(0, A, "start", "boom", NOW + i))
    assert state.rollout is not None and state.rollout.failures == ()


def test_without_canaries_a_spec_that_never_ran_a_job_and_crash_loops_rolls_back() -> None:
    state = reload(pool(2))
    state, notes = crash(state, 1, CRASH_LOOP)
    assert state.rollout is not None and state.rollout.phase is Phase.ROLLED_BACK


def test_reverting_the_configuration_mid_roll_out_cancels_it() -> None:
    state = reload(pool(2), canary=1)
    state, rollout = begin(state, OLD, image_from="ci:v2", image_to="ci:v1")
    assert rollout is None and state.rollout is None
    assert [state.target_spec(n) for n in range(2)] == [OLD, OLD]


def test_the_same_spec_again_starts_nothing_new() -> None:
    state = reload(pool(2), canary=1)
    again, rollout = begin(state, NEW, image_from="ci:v1", image_to="ci:v2")
    assert rollout is None and again == state


# ----------------------------------------------------------------------------- words


def test_snapshot_counts_slots_on_the_new_spec_and_busy_ones_on_the_old() -> None:
    state = reload(pool(3, busy=(2,)))
    record = slot(state, 0)
    for lane in record.lanes:
        record = record.with_lane(replace(lane, spec=NEW))
    state = state.with_slot(record)
    (snap,) = rollout_snapshots(state, "gpu")
    assert (snap.group, snap.state, snap.slots_total, snap.slots_new, snap.busy_old) == (
        "gpu", "rolling", 3, 1, 1,
    )  # fmt: skip
    assert describe(state) == "image ci:v2 on 1/3 slots, 1 busy on ci:v1"


def test_preview_says_which_lanes_change_when() -> None:
    before = pool(4, busy=(3,))
    lines = preview_lines(before, reload(before))
    assert lines[0] == "image ci:v1 -> ci:v2"
    assert lines[1] == (
        "slots 0-3: 4 standby lanes replaced now, 3 idle active lanes after the hand-over, "
        "1 busy lane after its job"
    )
    canary = preview_lines(before, reload(before, canary=1, jobs=2))
    assert canary[1].startswith("canary slots 0 first; the other 3 slots after 2 successful jobs")
    assert canary[2].startswith("slot 0: 1 standby lane replaced now")


def test_slot_ranges() -> None:
    assert slot_ranges([5, 0, 1, 2, 3, 7, 8]) == "0-3, 5, 7-8"
    assert slot_ranges([]) == ""


def test_reloading_the_rolled_back_spec_again_says_it_stays_rolled_back() -> None:
    state = reload(pool(2), canary=1)
    state, _ = crash(state, 0, CRASH_LOOP)
    again = reload(state, canary=1)
    assert again.rollout is state.rollout
    (line,) = preview_lines(state, again)
    assert line.startswith("ci:v2 stays rolled back (slot 0 crash-looped")
    assert line.endswith("the slots keep ci:v1; name another image to try again")
