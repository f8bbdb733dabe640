"""An image the driver cannot run, in the engine: (CUDA gate, slot state) -> actions, on a fake clock.

The host says whether the driver can run the group's image (`steps.CudaChecked`);
the engine holds every slot while it cannot: idle agents disabled, nothing
started (every start would fail), no failure counted, no park, a running job
never touched; released on the first check that says it can.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuci_tui.core.engine.gpu_admission import CUDA_INCOMPATIBLE, FOREIGN_PROCESS, GateKind
from gpuci_tui.core.engine.lifecycle import EngineState, Intent, Lane, gate_of
from gpuci_tui.core.engine.planning.planner import decide
from gpuci_tui.core.engine.server_steps import CheckAgent, SetEnabled
from gpuci_tui.core.engine.slot_gate import Gate
from gpuci_tui.core.engine.snapshots import SnapshotMeta, supervisor_snapshot
from gpuci_tui.core.engine.steps import Action, CudaChecked, Died, StartAgent, StopAgent
from gpuci_tui.core.engine.transitions.apply import apply
from gpuci_tui.core.models import HealthSnapshot, SlotState
from tests.core.lifecycle_helpers import (
    ABSENT,
    ACTIVE,
    BUSY,
    NOW,
    OFF_ENABLED,
    PARKED_DISABLED,
    RULES,
    STANDBY,
    engine,
    slot0,
)

A, B = Lane.A, Lane.B
WHY = (
    "image needs CUDA 12.4 (NVIDIA_REQUIRE_CUDA); driver 535.104.05 supports up to CUDA 12.2: "
    "use x:cuda12.2, or upgrade the driver to 550 or newer"
)
IDLE_DISABLED = {**ACTIVE, "enabled": False, "idle_verified": True}


def refused(state: EngineState, at: float = 25.0) -> EngineState:
    return apply(state, CudaChecked(at, WHY), RULES).state


ROWS: list[tuple[str, EngineState, list[Action]]] = [
    ("the idle active agent is disabled, still registered and running",
     refused(engine(ACTIVE, STANDBY)), [SetEnabled(0, A, 1, False)]),
    ("disabled but not yet confirmed idle: re-read it",
     refused(engine({**ACTIVE, "enabled": False}, STANDBY)), [CheckAgent(0, A, 1)]),
    ("settled: nothing at all (no stop, no start, no enable)",
     refused(engine(IDLE_DISABLED, STANDBY)), []),
    ("busy: the job runs on; only the flag is set so nothing follows it",
     refused(engine(BUSY, STANDBY)), [SetEnabled(0, A, 1, False)]),
    ("an exited lane is not started again (unlike a GPU held by someone else)",
     refused(engine(PARKED_DISABLED, STANDBY)), []),
    ("an empty slot starts nothing",
     refused(engine(ABSENT, ABSENT)), []),
    ("an exited lane still enabled is left alone: nothing starts it",
     refused(engine(OFF_ENABLED, STANDBY)), []),
    ("standby off: lane b is taken out as without the hold",
     refused(engine(IDLE_DISABLED, STANDBY, standby=False)), [StopAgent(0, B, "cb")]),
    ("draining: the drain rules apply",
     refused(engine(IDLE_DISABLED, STANDBY, intent=Intent.DRAIN)),
     [StopAgent(0, A, "ca"), StopAgent(0, B, "cb")]),
]  # fmt: skip


@pytest.mark.parametrize(("state", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_planner_cuda_table(state: EngineState, expected: list[Action]) -> None:
    after, decided = decide(state, NOW)
    got = [a for a in decided.actions if type(a).__name__ != "FetchLogs"]
    assert got == expected
    assert not any(isinstance(a, StartAgent) for a in got)
    assert not any(isinstance(a, SetEnabled) and a.enabled for a in got)
    if slot0(state).intent is Intent.RUN:
        assert slot0(after).message == f"held: {WHY}"


def test_without_the_hold_the_same_slots_start_and_enable() -> None:
    """The table above can fail: the same states, compatible, do start and enable."""
    assert StartAgent(0, A) in decide(engine(ABSENT, ABSENT), NOW)[1].actions
    assert SetEnabled(0, A, 1, True) in decide(engine(IDLE_DISABLED, STANDBY), NOW)[1].actions


def test_hold_and_release_are_one_event_each_and_release_enables_at_once() -> None:
    state = engine(IDLE_DISABLED, STANDBY)
    step = apply(state, CudaChecked(25.0, WHY), RULES)
    assert [(n.kind, n.message) for n in step.outputs] == [(CUDA_INCOMPATIBLE, f"held: {WHY}")]
    assert step.state.cuda == Gate(GateKind.HELD, WHY, CUDA_INCOMPATIBLE, since=25.0)
    again = apply(step.state, CudaChecked(26.0, WHY), RULES)
    assert again.outputs == () and again.state == step.state, "the same reason is no news"
    other = WHY.replace("535.104.05", "535.129.03")
    moved = apply(step.state, CudaChecked(27.0, other), RULES)
    assert [n.kind for n in moved.outputs] == [CUDA_INCOMPATIBLE]
    assert moved.state.cuda.since == 25.0 and moved.state.cuda.reason == other
    released = apply(moved.state, CudaChecked(85.0, ""), RULES)
    ((kind, message),) = [(n.kind, n.message) for n in released.outputs]
    assert kind == "cuda_compatible" and message.startswith("released after 60 s")
    assert not released.state.cuda.closed
    assert SetEnabled(0, A, 1, True) in decide(released.state, 85.0)[1].actions
    assert apply(released.state, CudaChecked(86.0, ""), RULES).outputs == ()


def test_a_job_ending_while_held_counts_no_failure_and_starts_nothing() -> None:
    state = refused(engine(BUSY, STANDBY))
    state = apply(state, Died(0, A, "ca", 0, 40.0), RULES).state
    for now in (40.0, 100.0, 1000.0):
        state, decided = decide(state, now)
        assert not any(isinstance(a, StartAgent) for a in decided.actions)
    slot = slot0(state)
    assert slot.failures == 0 and not slot.parked and slot.backoff_until is None


def test_a_failing_gpu_is_shown_first_then_the_image_then_a_foreign_process() -> None:
    xid = Gate(GateKind.QUARANTINED, "GPU 0: Xid 79", "xid", since=20.0)
    foreign = Gate(GateKind.HELD, "GPU 0 used by pid 1", FOREIGN_PROCESS, since=20.0)
    state = refused(engine(IDLE_DISABLED, STANDBY))
    assert gate_of(state, slot0(state)).code == CUDA_INCOMPATIBLE
    quarantined = state.with_slot(replace(slot0(state), gate=xid))
    assert gate_of(quarantined, slot0(quarantined)) == xid
    held = state.with_slot(replace(slot0(state), gate=foreign))
    assert gate_of(held, slot0(held)).code == CUDA_INCOMPATIBLE


def test_status_shows_the_slot_held_with_the_reason() -> None:
    meta = SnapshotMeta("https://dev.azure.com/o", "p", "i", "daemon", None, None)
    for state in (refused(engine(IDLE_DISABLED, STANDBY)), refused(engine(ABSENT, ABSENT))):
        snap = supervisor_snapshot(
            state, meta, NOW, azure=HealthSnapshot(), azure_requests=0, gpus_of=lambda n: ("0",)
        )
        (slot,) = snap.slots
        assert slot.state is SlotState.HELD
        assert (slot.gate, slot.gate_code, slot.gate_reason) == ("held", CUDA_INCOMPATIBLE, WHY)
    busy = refused(engine(BUSY, STANDBY))
    snap = supervisor_snapshot(
        busy, meta, NOW, azure=HealthSnapshot(), azure_requests=0, gpus_of=lambda n: ("0",)
    )
    assert snap.slots[0].state is SlotState.BUSY, "a running job shows as busy"
