"""The seeded world with a deeper standby and with ``standby = "auto"``.

The world (`tests.core.lifecycle_world`) asserts while it runs that no two
jobs ever share a slot's agents and that no container with a job is stopped;
here it runs with three lanes per slot, and with "auto" under bursts of short
jobs, while operators drain, restart, scale and resume at random.
"""

from __future__ import annotations

import pytest

from gpuci_tui.core.engine.standby.auto import AutoStandby
from tests.core.lifecycle_world import World


@pytest.mark.parametrize("seed", range(12))
def test_two_standbys_never_two_jobs_on_a_slot(seed: int) -> None:
    world = World(seed=seed, slots=3, standby=2, gated=seed % 2 == 1)
    world.run(600.0)
    assert len(world.done) > 30, f"only {len(world.done)} jobs done"
    # Three registrations per slot at the most, ever.
    assert len(world.regs) <= 3 * 3, sorted(world.regs)


@pytest.mark.parametrize("seed", range(12))
def test_auto_never_two_jobs_and_registrations_within_the_cap(seed: int) -> None:
    # 3 slots: 10 // 3 = 3 lanes each, so 2 standbys at the most; 4 lanes each while an
    # operator's scale to 2 holds, the retired slot's registrations still counted.
    cap = 10
    world = World(
        seed=seed, slots=3, standby=1, auto=AutoStandby(least=1, most=3, cap=cap),
        job_length=(0.5, 3.0), gated=seed % 2 == 1,
    )  # fmt: skip
    world.run(600.0, jobs_every=0.7)
    assert len(world.done) > 100, f"only {len(world.done)} jobs done"
    assert len(world.regs) <= cap, sorted(world.regs)
    assert world.state.auto is not None and world.state.auto.job_s > 0


@pytest.mark.parametrize("seed", range(6))
def test_auto_settles_back_to_its_idle_depth(seed: int) -> None:
    world = World(
        seed=seed, slots=2, standby=1, auto=AutoStandby(least=1, most=3, hold_down=60.0),
        crash_rate=0.0, job_length=(0.5, 3.0), gated=seed % 2 == 1,
    )  # fmt: skip
    world.run(300.0, jobs_every=0.5, commands=False)
    world.settle(240.0)
    assert world.state.standby == 1
    assert world.steady() == []
