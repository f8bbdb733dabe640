"""A start that finds its container name taken: ours waits, anyone else's is a named problem.

Tables on a fake clock: the `StartFailed` the executor sends (with the holder its
labels describe), the slot's message, the event said once, when the start is
tried again; and the general rule that no slot waits a minute without saying why.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpuci_tui.core.engine.lifecycle import EngineState, Lane, LanePhase
from gpuci_tui.core.engine.planning.planner import decide
from gpuci_tui.core.engine.pool_view import PoolView
from gpuci_tui.core.engine.server_steps import PoolRole, ServerFailed
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.engine.snapshots import slot_snapshot
from gpuci_tui.core.engine.steps import (
    CudaChecked,
    Died,
    NameHolder,
    Note,
    Removed,
    StartAgent,
    Started,
    StartFailed,
)
from gpuci_tui.core.engine.transitions.apply import apply
from gpuci_tui.core.engine.transitions.name_taken import LONG_WAIT
from tests.core.lifecycle_helpers import RULES, UNKNOWN, engine, slot0

A = Lane.A
OTHER = NameHolder("f" * 64, "exited", ours=False, instance="0badc0ffee00", state_dir="/srv/b")
UNLABELLED = NameHolder("e" * 64, "created", ours=False)
RUNNING = replace(OTHER, status="running")
OURS = NameHolder("d" * 64, "exited", ours=True, instance="mine")


def empty() -> EngineState:
    return engine(UNKNOWN, UNKNOWN, standby=False)


def conflict(at: float, holder: NameHolder | None) -> StartFailed:
    return StartFailed(0, A, "conflict", "Container name h-0 is still in use", at, holder)


@pytest.mark.parametrize(
    ("holder", "words"),
    [
        (
            OTHER,
            "the container name h-0 is taken by dead container (exited) ffffffffffff of another "
            "gpuci-tui instance (0badc0ffee00, state directory /srv/b); this slot starts once "
            "it is gone: remove it (docker rm h-0), or give this daemon another name_prefix",
        ),
        (
            UNLABELLED,
            "the container name h-0 is taken by container that never started eeeeeeeeeeee that "
            "gpuci-tui did not make (it has no gpuci-tui labels); this slot starts once it is "
            "gone: remove it (docker rm h-0), or give this daemon another name_prefix",
        ),
        (
            RUNNING,
            "the container name h-0 is taken by running container ffffffffffff of another "
            "gpuci-tui instance (0badc0ffee00, state directory /srv/b); this slot starts once "
            "it is gone: remove it (docker rm -f h-0 (it is running: make sure nothing needs "
            "it)), or give this daemon another name_prefix",
        ),
    ],
)
def test_a_name_held_by_a_container_not_ours_is_a_named_problem(
    holder: NameHolder, words: str
) -> None:
    step = apply(empty(), conflict(100.0, holder), RULES)
    slot = slot0(step.state)
    assert slot.message == words
    assert [(n.kind, n.message) for n in step.outputs if isinstance(n, Note)] == [
        ("name_taken", f"h-0: {words}")
    ]
    lane = slot.lane(A)
    assert lane.retry_at == 100.0 + RULES.poll_interval  # once a poll, not a busy loop
    assert (slot.failures, slot.parked, lane.phase) == (0, False, LanePhase.EMPTY)


def test_the_problem_is_said_once_and_the_slot_serves_once_the_name_is_free() -> None:
    state, notes = empty(), []
    at = 100.0
    for holder in (OTHER, OTHER, OTHER, UNLABELLED, UNLABELLED):
        state, plan = decide(state, at)
        assert plan.actions == (StartAgent(0, A),), f"a start is tried at {at}"
        step = apply(state, conflict(at, holder), RULES)
        state, at = step.state, at + RULES.poll_interval
        notes += [n.kind for n in step.outputs if isinstance(n, Note)]
        # Nothing is tried again before the next poll.
        assert decide(state, at - 0.1)[1].actions == ()
    assert notes == ["name_taken", "name_taken"]  # one per holder, not one per try
    state, plan = decide(state, at)
    assert plan.actions == (StartAgent(0, A),)
    state = apply(state, Started(0, A, "c" * 64, at), RULES).state
    slot = slot0(state)
    assert slot.message == ""
    assert (slot.lane(A).conflict_since, slot.lane(A).name_holder) == (None, None)


@pytest.mark.parametrize(
    ("holder", "held"),
    [(OURS, ": our dead container (exited) dddddddddddd still holds it"), (None, "")],
)
def test_our_own_name_is_retried_soon_and_a_long_wait_says_what_holds_it(
    holder: NameHolder | None, held: str
) -> None:
    state, at, retries = empty(), 100.0, []
    while at < 100.0 + LONG_WAIT + 3:
        step = apply(state, conflict(at, holder), RULES)
        assert not [n for n in step.outputs if isinstance(n, Note)]
        state = step.state
        retry = slot0(state).lane(A).retry_at
        assert retry is not None
        retries.append(retry - at)
        at = retry
    assert retries[:3] == pytest.approx([0.1, 0.2, 0.3]) and max(retries) == 2.0
    waited = at - retries[-1] - 100.0
    assert slot0(state).message == (
        f"waiting {waited:.0f} s for the name h-0 to be released{held}; if it stays, "
        "remove it: docker rm -f h-0"
    )


# --------------------------------------------------------------------------- no silent wait

READ = PoolView(pool_id=42, began_at=90.0)


def _died_unremoved(state: EngineState) -> EngineState:
    state = apply(state, Started(0, A, "c" * 64, 90.0), RULES).state
    state = apply(state, Died(0, A, "c" * 64, 0, 95.0), RULES).state
    return apply(state, Removed(0, A, "c" * 64, "device or resource busy", 96.0), RULES).state


def _booting(state: EngineState) -> EngineState:
    return apply(state, Started(0, A, "c" * 64, 95.0), RULES).state


def _observed(*observations: Any) -> Any:
    def build(state: EngineState) -> EngineState:
        for obs in observations:
            state = apply(state, obs, RULES).state
        return state

    return build


SLOW = SupervisorConfig(backoff_base=120.0, backoff_max=600.0)


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (_observed(conflict(95.0, OTHER)), "is taken by dead container"),
        (_observed(StartFailed(0, A, "pull", "registry down", 95.0)), "waiting for the image"),
        (_observed(StartFailed(0, A, "token", "no PAT", 95.0)), "cannot start: no PAT"),
        (_observed(StartFailed(0, A, "engine", "refused", 95.0)), "waiting for the Docker engine"),
        (_observed(PoolRole(95.0, "not an Administrator")), "waiting for the organisation"),
        (_observed(CudaChecked(95.0, "image needs CUDA 13")), "image needs CUDA 13"),
        (_observed(ServerFailed(0, A, "HTTP 503", 200.0)), "waiting for Azure DevOps: HTTP 503"),
        (_died_unremoved, "for the dead container cccccccccccc to be removed"),
        (_booting, "h-0 started 6"),
    ],
)
def test_no_slot_waits_a_minute_without_saying_what_and_why(build: Any, says: str) -> None:
    state = build(replace(empty(), pool=READ))
    now = 95.0 + LONG_WAIT + 1
    state, _ = decide(state, now)
    message = slot_snapshot(slot0(state), state, now, ("none",)).message
    assert says in message, message


def test_a_long_backoff_says_when_the_next_start_is() -> None:
    state = apply(empty(), Started(0, A, "c" * 64, 90.0), SLOW).state
    state = apply(state, Died(0, A, "c" * 64, 1, 95.0), SLOW).state
    now = 95.0 + LONG_WAIT + 1
    state, _ = decide(state, now)
    message = slot_snapshot(slot0(state), state, now, ("none",)).message
    assert message.startswith("failed (exit code 1") and "next start in 120 s" in message
