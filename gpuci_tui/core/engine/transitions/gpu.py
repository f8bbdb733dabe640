"""Transitions: fold one GPU observation into each slot's gate (pure).

A slot's gate closes on the first frame in which one of its GPUs does not
pass (a foreign process: *held*; a failing GPU: *quarantined*), so a job never
starts on a GPU known to be taken. It opens on the first frame in which every
GPU passes again: the planner then enables the slot's standby at once (one
PATCH), well within the 2 s the operator is promised.

The hold-down damps flapping without delaying that common case: a gate that
closes again less than ``hold_down`` seconds after it opened is *flapping*,
and a flapping gate opens only after its GPUs passed for ``hold_down``
seconds without a break. So a process that comes and goes every second
toggles the agent once per hold-down at most, while a GPU freed once is
released on the next frame.

An operator's ``gpu clear`` (the slot is in `GpuObserved.cleared`) means "I
checked this GPU, use it now": the gate opens on that frame whatever the
hold-down, and the release does not count as one of a flapping GPU's, so a
new fault afterwards closes the gate like a first one.

The group's image has a gate of its own (`cuda_checked`): closed while the
driver cannot run it, open again on the first check that says it can.

Critical Xids are written on the lanes that hold a job, so the history can
mark the job that ran while its GPU failed.
"""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.core.engine.gpu_admission import CUDA_INCOMPATIBLE, GateKind, GateReading
from gpuci_tui.core.engine.lifecycle import EngineState, SlotRecord
from gpuci_tui.core.engine.slot_gate import Gate
from gpuci_tui.core.engine.steps import CudaChecked, GpuObserved, Note


def gpu_observed(state: EngineState, obs: GpuObserved) -> tuple[EngineState, tuple[Note, ...]]:
    """Fold ``obs`` into every slot it names."""
    notes: list[Note] = []
    for number, reading in obs.readings:
        slot = state.slot(number)
        if slot is None:
            continue
        cleared = number in obs.cleared
        gate, note = next_gate(slot.gate, reading, obs.at, obs.hold_down, cleared=cleared)
        if note is not None:
            notes.append(Note(note[0], note[1], number))
        if slot.gate.closed and not gate.closed:
            slot = _forget_idle_xids(slot)
        slot = _mark_xids(replace(slot, gate=gate), reading)
        state = state.with_slot(slot)
    return state, tuple(notes)


def next_gate(
    gate: Gate, reading: GateReading, at: float, hold_down: float, *, cleared: bool = False
) -> tuple[Gate, tuple[str, str] | None]:
    """The gate after one reading, and the (kind, message) of the event it makes, if any.

    ``cleared``: the operator has just cleared the faults of the slot's GPUs
    (``gpu clear``): no hold-down, and no flapping remembered from before.
    """
    if cleared:
        # The operator vouches for the GPU: forget its earlier releases and closes.
        gate = replace(gate, released_at=None, flapping=False, passing_since=None)
    if reading.kind is not GateKind.OPEN:
        if not gate.closed:
            flapping = gate.released_at is not None and at - gate.released_at < hold_down
            closed = Gate(
                reading.kind,
                reading.reason,
                reading.code,
                since=at,
                released_at=gate.released_at,
                flapping=flapping,
            )
            return closed, (f"gpu_{reading.kind.value}", f"{reading.kind.value}: {reading.reason}")
        changed = (reading.kind, reading.code) != (gate.kind, gate.code)
        kept = replace(
            gate, kind=reading.kind, reason=reading.reason, code=reading.code, passing_since=None
        )
        if changed:
            return kept, (f"gpu_{reading.kind.value}", f"{reading.kind.value}: {reading.reason}")
        return kept, None
    if not gate.closed:
        return gate, None
    passing = gate.passing_since if gate.passing_since is not None else at
    if gate.flapping and at - passing < hold_down:
        return replace(gate, passing_since=passing), None
    held_for = at - (gate.since if gate.since is not None else at)
    message = f"released after {held_for:.0f} s {gate.kind.value}; was: {gate.reason}"
    if cleared:
        # Not a release of its own: a fault after it is a first close, not a flap.
        return Gate(), ("gpu_released", f"{message} (cleared by the operator)")
    return Gate(released_at=at), ("gpu_released", message)


def _mark_xids(slot: SlotRecord, reading: GateReading) -> SlotRecord:
    """Mark every lane that runs or could be running a job (its job may not be read yet)."""
    if not reading.xids:
        return slot
    for lane in slot.lanes:
        if lane.container_id is not None and (lane.capable or lane.took_job):
            fresh = tuple(x for x in reading.xids if x not in lane.xids)
            slot = slot.with_lane(replace(lane, xids=(*lane.xids, *fresh)))
    return slot


def _forget_idle_xids(slot: SlotRecord) -> SlotRecord:
    """On release: a lane marked while idle (then disabled) took no job during the Xid."""
    for lane in slot.lanes:
        if lane.xids and lane.job is None and not lane.took_job:
            slot = slot.with_lane(replace(lane, xids=()))
    return slot


def cuda_checked(state: EngineState, obs: CudaChecked) -> tuple[EngineState, tuple[Note, ...]]:
    """Hold every slot of the group while the driver cannot run its image; release at once.

    No hold-down: the reason changes only with the driver or the image, never flaps.
    """
    gate = state.cuda
    if obs.reason:
        if gate.closed and gate.reason == obs.reason:
            return state, ()
        since = gate.since if gate.closed else obs.at
        held = Gate(GateKind.HELD, obs.reason, CUDA_INCOMPATIBLE, since=since)
        return replace(state, cuda=held), (Note(CUDA_INCOMPATIBLE, f"held: {obs.reason}"),)
    if not gate.closed:
        return state, ()
    held_for = obs.at - (gate.since if gate.since is not None else obs.at)
    message = f"released after {held_for:.0f} s: the driver runs the image now; was: {gate.reason}"
    return replace(state, cuda=Gate()), (Note("cuda_compatible", message),)
