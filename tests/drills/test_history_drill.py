"""Issue 28, item 1: the history drill on the real daemon and Docker engine, short settings.

Roll-outs, a bad build rolled back, two daemon SIGKILLs, two agents killed under
their jobs, HTTP 500 then 429, jobs all along: every job that ran has exactly one
history row, with its result (tests/drills/history_drill.py). The long run is
bench/bench_history_drill.py; its figures are in BENCHMARKS.md ("Job history: rows
against jobs that ran").
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.drills.history_drill import Settings, history_drill
from tests.real.rig import Rig, make_rig

pytestmark = [pytest.mark.docker, pytest.mark.daemon]

V2 = "gpuci-drill/history-agent:v2"


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


def test_every_job_that_ran_has_exactly_one_history_row(
    rig: Rig, emulator_image: str, v2_image: str, broken_image: str
) -> None:
    figures = history_drill(rig, (emulator_image, v2_image, broken_image), Settings())
    print(f"\nhistory drill: {figures.line()}")
    assert figures.missing == [], figures.line()
    assert figures.twice == [] and figures.extra == [], figures.line()
    assert figures.wrong_result == [], figures.line()
    assert figures.rows == figures.jobs > 0
    assert figures.lost == [] and figures.overlaps == [], (
        figures.line(),
        figures.overlaps,
    )
    assert len(figures.killed) == 2
