"""Planning a running slot whose gate is closed: held or quarantined (see `Gate`, `gate_of`).

The slot's agents stay registered and their containers stay up, but every
lane that could be handed a job is disabled on the server: an idle agent
waits there, ready to be enabled with one PATCH when the gate opens (then
`planner_run` picks it like any standby). A busy lane is disabled too, which
never touches its job: the flag only says "no next job", and its next
container comes back disabled.

*Held*: exited lanes are started again, disabled (their registrations are
set to disabled first), so the slot is ready when the GPU frees. A lane name
never registered is not started: its first registration would come up
enabled (with the start gate it is: it waits for our go, and is disabled
before it gets it). *Quarantined*: nothing is started; the slot is not replenished until
the fault ends or the operator clears it. *Held for its image* (the driver
cannot run it, `steps.CudaChecked`): as quarantined, since every start would
fail; nothing starts until the driver or the image changes, so the slot never
crash-loops, counts no failure and never parks for it.

Taking lanes out (restart, standby off) follows the same rules as a running
slot, so drain, restart and scale behave as without admission.
"""

from __future__ import annotations

from gpuci_tui.core.engine.gpu_admission import CUDA_INCOMPATIBLE, GateKind
from gpuci_tui.core.engine.lifecycle import LanePhase, LaneRecord, gate_of
from gpuci_tui.core.engine.planning.draft import Draft
from gpuci_tui.core.engine.planning.gate import identify, prepare_held
from gpuci_tui.core.engine.planning.run import leaving_why, take_out
from gpuci_tui.core.engine.standby.auto import unused_why


def plan_held(draft: Draft) -> None:
    """Plan a RUN/RESTART slot whose gate is closed."""
    slot = draft.slot
    gate = gate_of(draft.state, slot)
    draft.say(f"{gate.kind.value}: {gate.reason}")
    # An image the driver cannot run fails every start (nvidia-container-cli refuses it):
    # nothing is started, as for a failing GPU, so the slot never crash-loops or parks.
    starts_nothing = gate.kind is GateKind.QUARANTINED or gate.code == CUDA_INCOMPATIBLE
    used = draft.state.used_lanes
    for lane in slot.lanes:
        leaving = lane.container_id is not None and lane.container_id in slot.restart_ids
        if lane.lane not in used or leaving:
            take_out(draft, lane, leaving_why(slot, lane) if leaving else unused_why(draft.state))
        else:
            _hold(draft, lane, starts_nothing=starts_nothing)


def _hold(draft: Draft, lane: LaneRecord, *, starts_nothing: bool) -> None:
    if draft.claimed(lane) or lane.phase is LanePhase.STOPPING:
        return
    if lane.held:
        prepare_held(draft, lane)  # at the start gate: disabled before its go
        return
    if lane.live:
        if lane.agent_id is None:
            # Registers within seconds; disabled as soon as it says so and a read by
            # name gives its id (or the periodic read shows it).
            identify(draft, lane)
        elif lane.enabled is not False:
            draft.set_enabled(lane, False)
        elif lane.job is None and not lane.idle_verified:
            # Confirm it holds no job: only then is it a standby the release can enable.
            draft.check(lane)
        return
    if starts_nothing or (lane.agent_id is None and not draft.gated):
        return
    if lane.agent_id is not None and lane.enabled is not False:
        # Its next container must come back disabled: set the flag while none runs.
        draft.set_enabled(lane, False)
    elif draft.can_start(lane):
        draft.start(lane)
