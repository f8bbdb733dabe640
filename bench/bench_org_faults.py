"""Throttling and outages: intake while the organisation refuses every call of the daemon.

The drill of tests/drills/org_fault_intake.py with the issue's long settings: the
real ``gpuci-tui run`` with hot standby on the real Docker engine, emulator agents
that start like the real one (6 s to register, 3 s to a session), 3-s jobs that
keep coming, and every public call (the daemon's; the agents go on) answered 429
(``Retry-After``) for 60 s, or 500 for 30 s. Per run it prints jobs started in the
window and per minute (against the cold path: one job per lane per start-up +
job), overlaps, jobs lost, the daemon's requests the organisation refused in the
window, when the daemon's first call was answered after the window, and how long each
slot's first job after that answer waited.

``--start mid-flow`` (the default) begins the window while the slots run jobs;
``--start idle`` on idle slots with ready standbys, as the jobs begin to come.
To measure other code (e.g. before a change), run this script and
tests/drills/org_fault_intake.py from that checkout with its own virtualenv: the
daemon is ``python -m gpuci_tui.cli.main`` of the interpreter and directory this
runs in. ``--drills`` also runs drills 5 and 6
(tests/drills/test_org_fault_drills.py) with the issue's 60-s windows (500 for 30 s
then 429; unreachable); they assert as in the tests and print their figures.

Usage: python bench/bench_org_faults.py [--faults 429 500] [--slots 4] [--job-seconds 3]
       [--start mid-flow idle] [--runs 1] [--drills]
Writes bench/results/org_faults.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import docker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the drill's scenario lives with the drills

from bench_engine import machine  # noqa: E402

from gpuci_tui.sim.image import build_emulator_image  # noqa: E402
from gpuci_tui.sim.records import REALISTIC_STARTUP  # noqa: E402
from tests.drills.org_fault_intake import Fault, Intake, refused_intake  # noqa: E402
from tests.drills.test_org_fault_drills import drill5, drill6  # noqa: E402
from tests.real.rig import make_rig  # noqa: E402

#: The issue's windows: 60 s of 429, 30 s of 500.
WINDOWS: dict[Fault, float] = {"429": 60.0, "500": 30.0}
#: The 429's Retry-After: longer than the client's inline wait (5 s), so the daemon backs off.
RETRY_AFTER = 10.0


def one_run(
    client: Any, image: str, fault: Fault, *, slots: int, job_seconds: float, mid_flow: bool
) -> Intake:  # fmt: skip
    """One fault on a fresh organisation and daemon (the daemon's default settings)."""
    startup = (REALISTIC_STARTUP.register, REALISTIC_STARTUP.session)
    with (
        tempfile.TemporaryDirectory(prefix="gpuci-orgfaults-") as tmp,
        contextlib.contextmanager(make_rig)(
            Path(tmp), client, image, count=slots, startup=startup, heartbeat_timeout=10.0,
            poll_interval=10.0, backoff_base=2.0, backoff_max=60.0, park_after=5,
            stop_timeout=30.0,
        ) as rig,
    ):  # fmt: skip
        return refused_intake(
            rig,
            fault,
            window=WINDOWS[fault],
            job_seconds=job_seconds,
            retry_after=RETRY_AFTER,
            startup=sum(startup),
            mid_flow=mid_flow,
            settle=120.0,
        )


def long_drills(client: Any, image: str) -> None:
    """Drills 5 and 6 with the issue's windows, each on a fresh rig (they print their figures)."""
    for drill in (drill5, drill6):
        with (
            tempfile.TemporaryDirectory(prefix="gpuci-orgdrill-") as tmp,
            contextlib.contextmanager(make_rig)(Path(tmp), client, image, count=2) as rig,
        ):
            began = time.time()
            if drill is drill5:
                drill5(rig, server_errors=30.0, window=60.0, retry_after=RETRY_AFTER)
            else:
                drill6(rig, outage=60.0)
            print(f"{drill.__name__}: passed in {time.time() - began:.0f} s", flush=True)


def row(got: Intake, start: str) -> str:
    waits = " / ".join(f"{w:.2f}" for w in got.first_waits)
    after = " / ".join(f"{w:.1f}" for w in got.after_window)
    back = f"{got.back_after:.1f}" if got.back_after is not None else "-"
    return (
        f"| {got.fault} for {got.window:.0f} s | {start} | {got.started} | "
        f"{got.per_minute:.1f} ({got.cold_per_minute:.0f}) | {list(got.per_slot)} | "
        f"{got.overlaps} | {got.lost} | {got.requests} | {back} | {waits} | {after} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--faults", nargs="+", default=["429", "500"], choices=["429", "500"])
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--job-seconds", type=float, default=3.0)
    parser.add_argument("--start", nargs="+", default=["mid-flow"], choices=["mid-flow", "idle"])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--drills", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "org_faults.json")
    args = parser.parse_args()
    client = docker.from_env()
    image = build_emulator_image(client)
    results: list[dict[str, Any]] = []
    lines = [
        "| fault | window begins | jobs started | per min (cold path) | per slot | overlaps "
        "| lost | requests refused | answered after (s) | first job per slot waited (s) "
        "| from the window's end (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    began = time.time()
    if args.drills:
        long_drills(client, image)
    for _ in range(args.runs):
        for start in args.start:
            for fault in args.faults:
                got = one_run(
                    client, image, fault, slots=args.slots, job_seconds=args.job_seconds,
                    mid_flow=start == "mid-flow",
                )  # fmt: skip
                print(got.line(), flush=True)
                lines.append(row(got, start))
                figures = {k: v for k, v in asdict(got).items() if k != "jobs"}
                results.append(
                    {**figures, "start": start, "per_minute": round(got.per_minute, 1),
                     "cold_per_minute": round(got.cold_per_minute, 1)}
                )  # fmt: skip
    report = {
        "machine": machine(),
        "daemon": str(ROOT),
        "wall_s": round(time.time() - began),
        "runs": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
