"""``standby = "auto"`` after a restart: it starts from the local history (`standby_auto.seeded`).

A restarted daemon has measured no job and no start-up of its own yet. With
the history's recent figures (3-s jobs, 9-s start-ups) it asks for the depth
that hides a start-up behind the other lanes' jobs at the first read that shows
a queue, before its first job; without a history it behaves as before.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuci_tui.core.engine.lifecycle import EngineState, new_slot
from gpuci_tui.core.engine.pool_view import PoolView
from gpuci_tui.core.engine.standby.auto import AutoSeed, depth_of, observe, seeded
from gpuci_tui.core.engine.standby.state import AutoStandby

THREE_BY_NINE = AutoSeed(jobs=(3.1, 2.9, 3.0, 40.0, 3.0), startups=(9.0, 9.4, 8.8))
"""Mostly 3-s jobs (one 40-s outlier) and 9-s start-ups."""

# name, seed, jobs queued at the first read (no lane of the restarted daemon is ready
# yet), the depth asked for
ROWS: list[tuple[str, AutoSeed | None, int, int]] = [
    ("3-s jobs, 9-s start-ups, a queue: ceil(9 / 3) = 3 before the first job",
     THREE_BY_NINE, 2, 3),
    ("no history: the queue alone, one lane per queued job per slot", None, 2, 1),
    ("empty history: the same", AutoSeed(), 2, 1),
    ("start-ups only, no job length: the queue alone", AutoSeed(startups=(9.0,)), 2, 1),
    ("jobs longer than start-ups: the queue alone", AutoSeed((60.0,), (9.0,)), 2, 1),
    ("nothing queued: the idle depth, whatever the history", THREE_BY_NINE, 0, 1),
    ("no history, a long queue: as before, up to standby_max", None, 9, 3),
]  # fmt: skip


@pytest.mark.parametrize(
    ("seed", "queued", "depth"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_the_first_read_after_a_restart(seed: AutoSeed | None, queued: int, depth: int) -> None:
    start, auto = depth_of("auto", least=1, most=3)
    assert auto is not None
    if seed is not None:
        auto = seeded(auto, seed)
    slots = tuple(new_slot("h", n, lanes=4) for n in range(2))
    state = EngineState("h", 2, slots, standby=start, auto=auto)
    state = replace(state, pool=PoolView(42, began_at=10.0, queued_jobs=queued))
    assert int(observe(state, 10.0).standby) == depth


def test_the_seed_is_the_typical_figure_and_the_lanes_measure_on_from_there() -> None:
    auto = seeded(AutoStandby(), THREE_BY_NINE)
    assert (auto.job_s, auto.startup_s) == (3.0, 9.0), "medians: one outlier changes nothing"
    assert seeded(AutoStandby(), AutoSeed(jobs=(0.0, -1.0))).job_s == 0.0, "nothing measured"
