"""A forced agent update costs one start per slot: lanes without the cached package are outdated.

When the organisation requires a newer agent, a container without the host's
cached package spends its next job leaving to update (exit 12). Once the host
says new containers get the package (`PackageCached`), such lanes follow the
roll-out's outdated-lane rule: the standby is replaced first while idle, the idle
active after a hand-over, a busy one only after its job.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpuci_tui.core.docker.agentspec import (
    LABEL_AGENT_PACKAGE,
    LABEL_CONFIG,
    LABEL_LANE,
    LABEL_SLOT,
    placed,
)
from gpuci_tui.core.engine.lifecycle import EngineState, Lane
from gpuci_tui.core.engine.rollout.progress import advance
from gpuci_tui.core.engine.server_steps import SetEnabled
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.engine.steps import (
    Action,
    Appeared,
    Listed,
    PackageCached,
    RemoveContainer,
    StartAgent,
    Started,
    StopAgent,
)
from gpuci_tui.core.protocols import ContainerInfo
from tests.core.lifecycle_helpers import ACTIVE, BUSY, NOW, STANDBY, actions, engine, slot0

A, B = Lane.A, Lane.B
SPEC, OTHER = "spec-v1", "spec-v2"
NEW = "4.270.0"


def lane(preset: dict[str, Any], package: str = "", spec: str = SPEC) -> dict[str, Any]:
    """A lane preset on ``spec`` whose container mounts ``package`` ("" for none)."""
    return {**preset, "spec": spec, "package": package}


def cached(state: EngineState, version: str = NEW) -> EngineState:
    return advance(state, PackageCached(NOW, version), SupervisorConfig()).state


ROWS: list[tuple[str, EngineState, list[Action]]] = [
    ("no package cached: nothing is outdated",
     engine(lane(ACTIVE), lane(STANDBY), spec=SPEC), []),
    ("cached, both idle without it: the standby is replaced first, the active serves meanwhile",
     cached(engine(lane(ACTIVE), lane(STANDBY), spec=SPEC)), [StopAgent(0, B, "cb")]),
    ("the standby has it, the idle active does not: hand over (disable the active)",
     cached(engine(lane(ACTIVE), lane(STANDBY, NEW), spec=SPEC)), [SetEnabled(0, A, 1, False)]),
    ("busy without it: never stopped, disabled to leave after its job; the standby replaced",
     cached(engine(lane(BUSY), lane(STANDBY), spec=SPEC)),
     [SetEnabled(0, A, 1, False), StopAgent(0, B, "cb")]),
    ("both have it: nothing to do",
     cached(engine(lane(ACTIVE, NEW), lane(STANDBY, NEW), spec=SPEC)), []),
    ("an older cached package counts as none",
     cached(engine(lane(ACTIVE, NEW), lane(STANDBY, "4.264.2"), spec=SPEC)),
     [StopAgent(0, B, "cb")]),
    ("the package cleared (the image bakes it now): nothing outdated",
     cached(cached(engine(lane(ACTIVE), lane(STANDBY), spec=SPEC)), ""), []),
    ("a container of unknown spec is never outdated, package or not",
     cached(engine(ACTIVE, STANDBY, spec=SPEC)), []),
    ("paused: nothing is taken out (nothing could replace it)",
     cached(engine(lane(ACTIVE), lane(STANDBY), spec=SPEC, paused=True)), []),
]  # fmt: skip


@pytest.mark.parametrize(("state", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_lanes_without_the_cached_package_table(state: EngineState, expected: list[Action]) -> None:
    assert actions(state) == expected


def test_the_package_rule_is_the_configured_spec_s_only() -> None:
    # A slot a roll-out keeps on another spec: its lanes follow the roll-out's rule alone
    # (the package the host names is for the configured image).
    state = cached(engine(lane(ACTIVE, spec=OTHER), lane(STANDBY, spec=OTHER), spec=SPEC))
    assert state.agent_package == NEW
    assert state.outdated(0, slot0(state).lane(A))  # another spec than the target
    state = replace(state, spec=OTHER)
    state = replace(state, agent_package=NEW)
    assert state.outdated(0, slot0(state).lane(A))
    state = replace(state, agent_package="")
    assert not state.outdated(0, slot0(state).lane(A))


def test_the_replacement_is_a_plain_start_and_comes_back_current() -> None:
    empty = {**STANDBY, "container_id": None, "phase": "empty", "online": False}
    state = cached(engine(lane(ACTIVE, NEW), empty, spec=SPEC))
    assert StartAgent(0, B, SPEC) in actions(state)
    state = advance(
        state, Started(0, B, "cb2", NOW + 1, spec=SPEC, package=NEW), SupervisorConfig()
    ).state
    assert slot0(state).lane(B).package == NEW
    assert not state.outdated(0, slot0(state).lane(B))


def test_the_package_label_is_read_back_at_adoption_and_on_a_start_event() -> None:
    labels = {LABEL_SLOT: "0", LABEL_LANE: "a", LABEL_CONFIG: SPEC, LABEL_AGENT_PACKAGE: NEW}
    info = ContainerInfo("c1", "h-0", labels, "running", started_at=5.0)
    bare = ContainerInfo(
        "c2", "h-0-b", {**labels, LABEL_LANE: "b", LABEL_AGENT_PACKAGE: ""}, "running"
    )
    fresh = cached(EngineState("h", 1, (engine().slots[0],), spec=SPEC))
    state = advance(fresh, Listed(placed([info, bare]), 6.0), SupervisorConfig()).state
    assert slot0(state).lane(A).package == NEW and not state.outdated(0, slot0(state).lane(A))
    assert slot0(state).lane(B).package == "" and state.outdated(0, slot0(state).lane(B))
    state = advance(fresh, Appeared(0, B, "c3", 7.0, SPEC, NEW), SupervisorConfig()).state
    assert slot0(state).lane(B).package == NEW


# ----------------------------------------------------------------------------- the update exit

GONE = {"container_id": None, "phase": "empty", "online": False, "agent_id": 1, "enabled": True,
        "known_at": 20.0, "ended_at": 30.0, "dying_id": "ca"}  # fmt: skip
"""The active lane's container just left to update; its name is not free yet."""


def after_update_exit(standby: dict[str, Any]) -> EngineState:
    state = engine(GONE, standby, spec=SPEC)
    return state.with_slot(replace(slot0(state), update_exit_at=30.0))


PROMOTE = [
    ("a standby started before the update exit is not promoted: the slot waits for a fresh start",
     after_update_exit(lane(STANDBY)), []),
    ("a standby with the cached package is promoted at once",
     cached(after_update_exit(lane(STANDBY, NEW))), [SetEnabled(0, B, 2, True)]),
    ("a standby started after the update exit is promoted (it got what there was)",
     after_update_exit({**lane(STANDBY), "started_at": 31.0}), [SetEnabled(0, B, 2, True)]),
    ("no update exit: the standby is promoted as always",
     engine(GONE, lane(STANDBY), spec=SPEC), [SetEnabled(0, B, 2, True)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("state", "expected"), [r[1:] for r in PROMOTE], ids=[r[0] for r in PROMOTE]
)
def test_promoting_the_standby_after_an_update_exit_table(
    state: EngineState, expected: list[Action]
) -> None:
    # The dead container's removal is planned alike in every row.
    assert [a for a in actions(state) if not isinstance(a, RemoveContainer)] == expected
