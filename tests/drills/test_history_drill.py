"""Issue 28, item 1: the history drill on the real daemon and Docker engine, short settings.

Roll-outs, a bad build rolled back, daemon SIGKILLs, agents killed under their
jobs, HTTP 500 then 429, jobs all along: every job that ran has exactly one
history row, with its result (tests/drills/history_drill.py). The scenario runs
here in three parts by fault kind, each on a daemon of its own and each under
30 s (whole, it took 79 s in CI); every kind of event runs once. The daemon is the
real one with its history's waits for the organisation a fifth of the shipped ones
(tests/drills/history_daemon.py), as the faults are shorter than the issue's. The long run,
the whole scenario with the issue's lengths, is bench/bench_history_drill.py; its
figures are in BENCHMARKS.md ("Job history: rows against jobs that ran").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.drills.history_drill import (
    AGENT_KILL,
    BAD_BUILD,
    DAEMON_KILL,
    REFUSALS,
    ROLLOUT,
    Figures,
    Settings,
    history_drill,
)
from tests.real.rig import Rig, make_rig

pytestmark = [pytest.mark.docker, pytest.mark.daemon]

V2 = "gpuci-drill/history-agent:v2"

Drill = Callable[..., Figures]


@pytest.fixture
def rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    yield from make_rig(tmp_path, docker_client, emulator_image, count=2)


@pytest.fixture
def v2_image(docker_client: Any, emulator_image: str) -> Iterator[str]:
    """The emulator image under a second tag: another image reference, so another spec."""
    docker_client.images.get(emulator_image).tag(V2)
    yield V2
    with contextlib.suppress(Exception):  # a container of a failed drill may still use it
        docker_client.images.remove(V2)


@pytest.fixture
def drill(rig: Rig, emulator_image: str, v2_image: str, broken_image: str) -> Drill:
    """Run some events of the scenario on a fresh daemon; assert the proof; the figures."""

    def run(*events: str, **lengths: Any) -> Figures:
        settings = replace(Settings(), events=events, **lengths)
        figures = history_drill(rig, (emulator_image, v2_image, broken_image), settings)
        print(f"\nhistory drill ({', '.join(events)}): {figures.line()}\n{figures.timeline()}")
        assert figures.missing == [], figures.line()
        assert figures.twice == [] and figures.extra == [], figures.line()
        assert figures.wrong_result == [], figures.line()
        assert figures.rows == figures.jobs > 0
        assert figures.lost == [] and figures.overlaps == [], (
            figures.line(),
            figures.overlaps,
        )
        assert len(figures.killed) == events.count(AGENT_KILL)
        return figures

    return run


def test_roll_outs_and_a_bad_build_leave_exactly_one_row_per_job(drill: Drill) -> None:
    drill(ROLLOUT, BAD_BUILD)


def test_a_killed_daemon_and_a_killed_agent_leave_exactly_one_row_per_job(drill: Drill) -> None:
    drill(AGENT_KILL, DAEMON_KILL)


def test_http_500_then_429_leave_exactly_one_row_per_job(drill: Drill) -> None:
    figures = drill(REFUSALS)
    # The refusals reached the daemon: each window answered at least one of its calls.
    assert figures.refused.get(500, 0) >= 1 and figures.refused.get(429, 0) >= 1, figures.refused
