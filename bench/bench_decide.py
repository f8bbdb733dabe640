"""Planner benchmark: the CPU one `decide` costs, and the seeded worlds' run time.

`planner.decide` runs after every observation the daemon makes (a pool read, a
Docker event, a written flag), so its cost is the engine's CPU per job. The
seeded worlds of the tests (tests/core/lifecycle_world.py) drive it against
simulated Docker and Azure DevOps on a virtual clock; this records the states
one world of each kind hands to `decide`, then replays them ``--repeat`` times
and keeps the fastest pass. Times are the process's CPU time, not the wall clock,
so other work on a shared machine disturbs them less:

* µs per `decide`, per kind of world (plain standby, two standbys, "auto",
  GPU faults, reloads, a standby schedule);
* the CPU seconds one seed of each test's world takes end to end (best of ``--repeat``).

Usage: python bench/bench_decide.py [--repeat 5] [--seed 0]
Writes bench/results/decide.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tests.core.lifecycle_world as world_module  # noqa: E402
from gpuci_tui.core.engine.lifecycle import EngineState  # noqa: E402
from gpuci_tui.core.engine.planning import planner  # noqa: E402
from gpuci_tui.core.engine.standby.auto import AutoStandby  # noqa: E402
from gpuci_tui.core.engine.standby.schedule import DAYS, StandbySchedule  # noqa: E402
from tests.core.lifecycle_world import World  # noqa: E402

THURSDAY = DAYS.index("thursday")
SCHEDULE = StandbySchedule(
    "UTC", tuple(((0, 1), (300, 3), (600, 0)) if day == THURSDAY else () for day in range(7))
)


def worlds(seed: int) -> dict[str, Callable[[], World]]:
    """One world of each kind the tests run (same settings as their tests)."""

    def plain() -> World:
        world = World(seed=seed, slots=3, standby=True)
        world.run(600.0)
        return world

    def depth2() -> World:
        world = World(seed=seed, slots=3, standby=2)
        world.run(600.0)
        return world

    def auto() -> World:
        world = World(
            seed=seed, slots=3, standby=1, auto=AutoStandby(least=1, most=3, cap=10),
            job_length=(0.5, 3.0),
        )  # fmt: skip
        world.run(600.0, jobs_every=0.7)
        return world

    def gpu_faults() -> World:
        world = World(seed=seed, slots=3, standby=True, gpu_faults=True)
        world.run(600.0)
        return world

    def reloads() -> World:
        world = World(seed=seed, slots=3, standby=True, reloads=True)
        world.run(900.0)
        return world

    def schedule() -> World:
        auto = AutoStandby(least=1, most=3, hold_down=30.0)
        world = World(seed=seed, slots=2, standby=1, auto=auto, crash_rate=0.0)
        world.with_state(schedule=SCHEDULE)
        world.run(800.0, jobs_every=3.0, commands=False)
        world.settle(120.0)
        return world

    return {
        "standby 1": plain,
        "standby 2": depth2,
        'standby "auto", cap 10': auto,
        "GPU faults": gpu_faults,
        "reloads": reloads,
        "schedule + auto": schedule,
    }


def record(build: Callable[[], World]) -> tuple[list[tuple[EngineState, float]], float]:
    """The (state, now) pairs one world hands to `decide`, and the world's run time."""
    calls: list[tuple[EngineState, float]] = []

    def recording(state: EngineState, now: float) -> Any:
        calls.append((state, now))
        return planner.decide(state, now)

    world_module.decide = recording  # type: ignore[assignment]
    try:
        began = time.process_time()
        build()
        return calls, time.process_time() - began
    finally:
        world_module.decide = planner.decide


def replay(calls: list[tuple[EngineState, float]]) -> float:
    """Seconds one pass of `decide` over ``calls`` takes."""
    decide = planner.decide
    began = time.process_time()
    for state, now in calls:
        decide(state, now)
    return time.process_time() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for name, build in worlds(args.seed).items():
        calls, _ = record(build)
        runs = [replay(calls) for _ in range(args.repeat)]
        seconds = min(timed(build) for _ in range(args.repeat))
        rows.append(
            {
                "world": name,
                "decides": len(calls),
                "us_per_decide": round(min(runs) / len(calls) * 1e6, 1),
                "world_seconds": round(seconds, 3),
            }
        )
    result = {"seed": args.seed, "repeat": args.repeat, "worlds": rows}
    out = ROOT / "bench" / "results" / "decide.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"| world (seed {args.seed}) | decides | µs per decide | world run, CPU s |")
    print("| --- | --- | --- | --- |")
    for row in rows:
        print(
            f"| {row['world']} | {row['decides']} | {row['us_per_decide']} "
            f"| {row['world_seconds']} |"
        )


def timed(build: Callable[[], World]) -> float:
    """Seconds one world takes end to end."""
    began = time.process_time()
    build()
    return time.process_time() - began


if __name__ == "__main__":
    main()
