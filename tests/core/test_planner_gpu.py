"""GPU admission and health in the planner: (gate, slot state) -> actions, on a fake clock.

A closed gate (held: someone else's process; quarantined: a failing GPU)
disables the slot's idle agents and keeps them registered; a running job is
never touched; the gate opening enables the standby at once. Drain, restart
and the standby rules work as without admission.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuci_tui.core.engine.agent.steps import ReadAgent
from gpuci_tui.core.engine.gpu_admission import FOREIGN_PROCESS, GateKind, GateReading
from gpuci_tui.core.engine.lifecycle import EngineState, Intent, Lane
from gpuci_tui.core.engine.planning.planner import decide
from gpuci_tui.core.engine.server_steps import CheckAgent, SetEnabled
from gpuci_tui.core.engine.slot_gate import Gate
from gpuci_tui.core.engine.steps import (
    Action,
    Died,
    GpuObserved,
    RemoveContainer,
    StartAgent,
    StopAgent,
)
from gpuci_tui.core.engine.transitions.apply import apply
from gpuci_tui.core.engine.transitions.gpu import next_gate
from tests.core.lifecycle_helpers import (
    ABSENT,
    ACTIVE,
    BOOTING_NEW,
    BUSY,
    NOW,
    OFF_ENABLED,
    PARKED_DISABLED,
    RULES,
    STANDBY,
    UNKNOWN,
    dying,
    engine,
    slot0,
)

A, B = Lane.A, Lane.B
WHY = "GPU 0 used by pid 4242 python, 61 GB, not ours"
HELD = Gate(GateKind.HELD, WHY, FOREIGN_PROCESS, since=25.0)
QUARANTINED = Gate(GateKind.QUARANTINED, "GPU 0: Xid 79 (GPU fell off the bus)", "xid", since=25.0)
IDLE_DISABLED = {**ACTIVE, "enabled": False, "idle_verified": True}


def gated(state: EngineState, gate: Gate) -> EngineState:
    return state.with_slot(replace(slot0(state), gate=gate))


ROWS: list[tuple[str, EngineState, list[Action]]] = [
    ("held: the idle active agent is disabled (it stays registered and running)",
     gated(engine(ACTIVE, STANDBY), HELD), [SetEnabled(0, A, 1, False)]),
    ("held: disabled but not yet confirmed idle -> re-read it",
     gated(engine({**ACTIVE, "enabled": False}, STANDBY), HELD), [CheckAgent(0, A, 1)]),
    ("held and settled: both agents disabled and idle -> nothing (no stop, no enable)",
     gated(engine(IDLE_DISABLED, STANDBY), HELD), []),
    ("held, busy: the job is not touched; the flag is set so the next container is disabled",
     gated(engine(BUSY, STANDBY), HELD), [SetEnabled(0, A, 1, False)]),
    ("held, busy and already disabled: nothing at all",
     gated(engine({**BUSY, "enabled": False}, STANDBY), HELD), []),
    ("held: the exited lane is refilled disabled (registration already disabled)",
     gated(engine(PARKED_DISABLED, STANDBY), HELD), [StartAgent(0, A)]),
    ("held: an exited lane still enabled is disabled before its next container starts",
     gated(engine(OFF_ENABLED, STANDBY), HELD), [SetEnabled(0, A, 1, False)]),
    ("held: a name never registered is not registered (it would come up enabled)",
     gated(engine(IDLE_DISABLED, ABSENT), HELD), []),
    ("held: a new agent not yet registered -> wait (its line, or the periodic read)",
     gated(engine(BOOTING_NEW, STANDBY), HELD), []),
    ("held: a new agent says it registered -> read it by name, to disable it",
     gated(engine({**BOOTING_NEW, "said_registered": 28.0}, STANDBY), HELD),
     [ReadAgent(0, A, "h-0")]),
    ("quarantined: idle agent disabled like held",
     gated(engine(ACTIVE, STANDBY), QUARANTINED), [SetEnabled(0, A, 1, False)]),
    ("quarantined: an exited lane is not replenished",
     gated(engine(PARKED_DISABLED, STANDBY), QUARANTINED), []),
    ("quarantined, the job's container died: nothing started (the dead one is removed)",
     gated(engine(dying("ca", agent_id=1, enabled=False, idle_verified=True, known_at=20.0),
                  STANDBY), QUARANTINED), [RemoveContainer(0, A, "ca")]),
    ("open again: the disabled idle standby is enabled with one PATCH",
     engine(IDLE_DISABLED, STANDBY), [SetEnabled(0, A, 1, True)]),
    ("held, standby off: lane b is still taken out as without admission",
     gated(engine(IDLE_DISABLED, STANDBY, standby=False), HELD), [StopAgent(0, B, "cb")]),
    ("held and draining: drain rules apply (disable, confirm, stop)",
     gated(engine(IDLE_DISABLED, STANDBY, intent=Intent.DRAIN), HELD),
     [StopAgent(0, A, "ca"), StopAgent(0, B, "cb")]),
    ("held and paused: nothing is started",
     gated(engine(PARKED_DISABLED, STANDBY, paused=True), HELD), []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("state", "expected"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS]
)
def test_planner_gpu_table(state: EngineState, expected: list[Action]) -> None:
    after, decided = decide(state, NOW)
    got = [a for a in decided.actions if type(a).__name__ != "FetchLogs"]
    assert got == expected
    # A closed gate never enables a lane.
    if slot0(state).gate.closed:
        assert not any(isinstance(a, SetEnabled) and a.enabled for a in got)
    if slot0(state).gate.closed and slot0(state).intent is Intent.RUN:
        assert slot0(after).message.startswith(f"{slot0(state).gate.kind.value}: ")


def test_held_restart_replaces_idle_agents_disabled() -> None:
    state = gated(engine(IDLE_DISABLED, STANDBY, intent=Intent.RESTART), HELD)
    state = state.with_slot(replace(slot0(state), restart_ids=frozenset({"ca", "cb"})))
    got = list(decide(state, NOW)[1].actions)
    assert got == [StopAgent(0, A, "ca"), StopAgent(0, B, "cb")]


# --------------------------------------------------------------------------- the gate over time

HOLD_DOWN = 10.0
OPEN = GateReading()
BUSY_GPU = GateReading(GateKind.HELD, WHY, FOREIGN_PROCESS)


def test_gate_closes_at_once_and_opens_on_the_first_passing_frame() -> None:
    gate, note = next_gate(Gate(), BUSY_GPU, 100.0, HOLD_DOWN)
    assert gate.kind is GateKind.HELD and note == ("gpu_held", f"held: {WHY}")
    gate, note = next_gate(gate, BUSY_GPU, 101.0, HOLD_DOWN)
    assert gate.closed and note is None
    gate, note = next_gate(gate, OPEN, 150.0, HOLD_DOWN)
    assert not gate.closed and note is not None and note[0] == "gpu_released"
    assert gate.released_at == 150.0


def test_a_flapping_gpu_is_released_only_after_the_hold_down() -> None:
    gate = Gate(released_at=100.0)
    gate, _ = next_gate(gate, BUSY_GPU, 101.0, HOLD_DOWN)  # back within the hold-down
    assert gate.flapping
    for at in (102.0, 105.0, 111.0):
        gate, note = next_gate(gate, OPEN, at, HOLD_DOWN)
        assert gate.closed and note is None
    gate, _ = next_gate(gate, BUSY_GPU, 111.5, HOLD_DOWN)  # busy again: the count restarts
    gate, _ = next_gate(gate, OPEN, 112.0, HOLD_DOWN)
    gate, _ = next_gate(gate, OPEN, 121.9, HOLD_DOWN)
    assert gate.closed
    gate, note = next_gate(gate, OPEN, 122.0, HOLD_DOWN)
    assert not gate.closed and note is not None


def test_held_then_quarantined_is_one_more_event() -> None:
    gate, _ = next_gate(Gate(), BUSY_GPU, 1.0, HOLD_DOWN)
    xid = GateReading(GateKind.QUARANTINED, "GPU 0: Xid 79", "xid", (79,))
    gate, note = next_gate(gate, xid, 2.0, HOLD_DOWN)
    assert gate.kind is GateKind.QUARANTINED and note == (
        "gpu_quarantined",
        "quarantined: GPU 0: Xid 79",
    )


def test_release_within_two_seconds_of_the_gpu_passing() -> None:
    """Held at 100; the foreign process ends at 130; frames every second: enabled by 131."""
    state = gated(engine(IDLE_DISABLED, STANDBY), HELD)
    state = apply(state, GpuObserved(130.9, ((0, OPEN),), HOLD_DOWN), RULES).state
    _, decided = decide(state, 130.9)
    assert SetEnabled(0, A, 1, True) in decided.actions


def test_xid_during_a_job_is_kept_for_the_history() -> None:
    state = engine(BUSY, STANDBY)
    xid = GateReading(GateKind.QUARANTINED, "GPU 0: Xid 79", "xid", (79,))
    step = apply(state, GpuObserved(31.0, ((0, xid),)), RULES)
    assert [n.kind for n in step.outputs] == ["gpu_quarantined"]
    assert slot0(step.state).lane(A).xids == (79,) and slot0(step.state).lane(B).xids == ()
    ended = apply(step.state, Died(0, A, "ca", 0, 40.0), RULES)
    (job,) = [o for o in ended.outputs if type(o).__name__ == "JobEnded"]
    assert job.xids == (79,)
    assert slot0(ended.state).lane(A).xids == ()


def test_unknown_slot_in_a_reading_is_ignored() -> None:
    state = engine(UNKNOWN, UNKNOWN)
    assert apply(state, GpuObserved(1.0, ((5, BUSY_GPU),)), RULES).state == state


def test_a_gated_slot_shows_held_or_quarantined_even_without_a_container() -> None:
    from gpuci_tui.core.engine.snapshots import slot_state
    from gpuci_tui.core.models import SlotState

    assert slot_state(slot0(gated(engine(ABSENT, ABSENT), HELD)), NOW) is SlotState.HELD
    quarantined = slot0(gated(engine(PARKED_DISABLED, STANDBY), QUARANTINED))
    assert slot_state(quarantined, NOW) is SlotState.QUARANTINED
    busy = slot0(gated(engine(BUSY, STANDBY), QUARANTINED))
    assert slot_state(busy, NOW) is SlotState.BUSY, "a running job shows as busy"
    draining = slot0(gated(engine(ABSENT, ABSENT, intent=Intent.DRAIN), HELD))
    assert slot_state(draining, NOW) is SlotState.DRAINED


XID = GateReading(GateKind.QUARANTINED, "GPU 0: Xid 79", "xid", (79,))


def test_an_operator_clear_releases_a_flapping_gate_at_once() -> None:
    """Released at 100, quarantined again at 101 (flapping): `gpu clear` at 102 opens it then."""
    state = gated(engine(IDLE_DISABLED, STANDBY), Gate(released_at=100.0))
    state = apply(state, GpuObserved(101.0, ((0, XID),), HOLD_DOWN), RULES).state
    assert slot0(state).gate.flapping
    # Without the clear the hold-down holds it...
    waiting = apply(state, GpuObserved(102.0, ((0, OPEN),), HOLD_DOWN), RULES).state
    assert slot0(waiting).gate.closed
    # ...the operator's clear releases it on that frame, and the standby is enabled.
    step = apply(state, GpuObserved(102.0, ((0, OPEN),), HOLD_DOWN, cleared=frozenset({0})), RULES)
    gate = slot0(step.state).gate
    assert not gate.closed and not gate.flapping and gate.released_at is None
    assert [n.kind for n in step.outputs] == ["gpu_released"]
    _, decided = decide(step.state, 102.0)
    assert SetEnabled(0, A, 1, True) in decided.actions
    # A new fault afterwards closes it as a first one: released on the next passing frame.
    state = apply(step.state, GpuObserved(103.0, ((0, XID),), HOLD_DOWN), RULES).state
    assert slot0(state).gate.closed and not slot0(state).gate.flapping
    state = apply(state, GpuObserved(104.0, ((0, OPEN),), HOLD_DOWN), RULES).state
    assert not slot0(state).gate.closed


def test_a_clear_of_another_slots_gpus_keeps_the_hold_down() -> None:
    gate, _ = next_gate(Gate(released_at=100.0), XID, 101.0, HOLD_DOWN)
    state = gated(engine(IDLE_DISABLED, STANDBY), gate)
    observed = GpuObserved(102.0, ((0, OPEN),), HOLD_DOWN, cleared=frozenset({1}))
    assert slot0(apply(state, observed, RULES).state).gate.closed


def test_a_clear_while_the_gpu_still_fails_keeps_the_gate_closed() -> None:
    gate, _ = next_gate(Gate(released_at=100.0), XID, 101.0, HOLD_DOWN)
    gate, note = next_gate(gate, XID, 102.0, HOLD_DOWN, cleared=True)
    assert gate.closed and not gate.flapping and note is None
    gate, note = next_gate(gate, OPEN, 103.0, HOLD_DOWN)
    assert not gate.closed and note is not None
