"""The organisation refuses our identity the pool (issue 21): starts wait, no slot parks.

Tables on a fake clock: a `PoolRole` refusal holds every start with its reason on the
slot, the refused registrations that led to the check are forgiven (a parked slot is
unparked), failures during the refusal are not counted, and the role given back lets
every slot start at once.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuci_tui.core.engine.lifecycle import EngineState, Lane
from gpuci_tui.core.engine.server_steps import PoolRole
from gpuci_tui.core.engine.steps import Died, LogTail, Note, Removed, StartAgent, Started
from gpuci_tui.core.engine.transitions.apply import apply
from tests.core.lifecycle_helpers import NOW, RULES, UNKNOWN, actions, engine, observe, plan, slot0

A = Lane.A
CID = "c" * 64
REASON = (
    "the service principal gpuci-lab is not an Administrator of pool gpu: add it in "
    "Organization settings → Agent pools → gpu → Security"
)


def refused_once(code: int) -> EngineState:
    """One slot whose first container exited ``code`` without a job (a failure)."""
    state = engine(UNKNOWN, UNKNOWN, standby=False)
    state = observe(state, Started(0, A, CID, 10.0), Died(0, A, CID, code, 11.0))
    # Its tail read and the container removed: the lane's name is free again.
    state = observe(state, LogTail(0, CID, ("error: HTTP 403",)), Removed(0, A, CID))
    assert slot0(state).failures == 1 and slot0(state).lane(A).name_free
    return state


@pytest.mark.parametrize("code", [1, 10])
def test_a_refusal_forgives_the_refused_registrations_and_holds_starts(code: int) -> None:
    state = refused_once(code)
    step = apply(state, PoolRole(12.0, REASON), RULES)
    assert step.outputs == (Note("org_refused", f"agent starts wait: {REASON}"),)
    slot = slot0(step.state)
    assert (slot.failures, slot.parked, slot.backoff_until) == (0, False, None)
    after, decided = plan(step.state, NOW)
    assert not any(isinstance(a, StartAgent) for a in decided.actions)
    assert slot0(after).message == f"waiting for the organisation: {REASON}"


def test_a_slot_parked_for_refused_registrations_is_unparked() -> None:
    state = refused_once(1)
    state = state.with_slot(replace(slot0(state), parked=True, failures=5))
    state = observe(state, PoolRole(12.0, REASON))
    assert not slot0(state).parked and slot0(state).failures == 0


def test_a_slot_parked_for_another_reason_stays_parked() -> None:
    state = refused_once(137)  # killed: not a registration the organisation refused
    state = state.with_slot(replace(slot0(state), parked=True, failures=5))
    state = observe(state, PoolRole(12.0, REASON))
    assert slot0(state).parked and slot0(state).failures == 5


def test_failures_during_the_refusal_are_not_counted() -> None:
    state = observe(engine(UNKNOWN, UNKNOWN, standby=False), PoolRole(5.0, REASON))
    # A container started just before the refusal was known fails to register too.
    state = observe(state, Started(0, A, CID, 10.0), Died(0, A, CID, 1, 11.0))
    assert slot0(state).failures == 0 and slot0(state).backoff_until is None


def test_the_role_back_starts_every_slot_at_once() -> None:
    state = refused_once(1)
    state = observe(state, PoolRole(12.0, REASON))
    state, _ = plan(state, NOW)
    step = apply(state, PoolRole(70.0, ""), RULES)
    assert step.outputs[0].kind == "org_restored"
    assert slot0(step.state).message == "" and step.state.org_refused == ""
    assert actions(step.state, NOW) == [StartAgent(0, A)]


def test_the_same_word_twice_changes_nothing() -> None:
    state = observe(refused_once(1), PoolRole(12.0, REASON))
    assert apply(state, PoolRole(72.0, REASON), RULES).outputs == ()
    fresh = engine(UNKNOWN, UNKNOWN, standby=False)
    assert apply(fresh, PoolRole(1.0, ""), RULES).state == fresh
