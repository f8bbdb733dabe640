"""A start held back by a failed pull: the lane waits and retries, never parks (a table)."""

from __future__ import annotations

from gpuci_tui.core.engine.lifecycle import Lane
from gpuci_tui.core.engine.steps import StartAgent, StartFailed
from gpuci_tui.core.engine.transitions.apply import apply
from gpuci_tui.core.engine.transitions.pull import PULL_RETRY
from tests.core.lifecycle_helpers import RULES, UNKNOWN, actions, engine, slot0

A = Lane.A
REASON = (
    "pull of 127.0.0.1:5000/agent:v2 failed: unauthorized (check `docker login 127.0.0.1:5000`)"
)


def test_a_failed_pull_waits_and_retries_without_counting_towards_parking() -> None:
    state = engine(UNKNOWN, UNKNOWN, standby=False)
    notes = []
    # Many more failures than park_after: a registry outage of an hour parks nothing.
    for i in range(RULES.park_after * 3):
        at = 50.0 + i * PULL_RETRY
        step = apply(state, StartFailed(0, A, "pull", REASON, at), RULES)
        state = step.state
        notes += step.outputs
        slot = slot0(state)
        assert (slot.failures, slot.parked, slot.backoff_until) == (0, False, None)
        assert slot.lane(A).retry_at == at + PULL_RETRY
        assert slot.message == f"waiting for the image: {REASON}"
        # Not before retry_at; at retry_at the lane is started again.
        assert not any(isinstance(a, StartAgent) for a in actions(state, at + PULL_RETRY - 1))
        assert StartAgent(0, A) in actions(state, at + PULL_RETRY)
    # One event per slot and reason, not one per retry.
    assert [(n.kind, n.message) for n in notes] == [("image_wait", f"h-0: {REASON}")]
    other = apply(state, StartFailed(0, A, "pull", "pull of x failed: not found", 900.0), RULES)
    assert [n.kind for n in other.outputs] == ["image_wait"]
