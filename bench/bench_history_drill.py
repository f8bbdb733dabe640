"""The history drill with the issue's long settings: jobs that ran against history rows.

The scenario of tests/drills/history_drill.py (issue 28, item 1) on the real
``gpuci-tui run`` with hot standby and the real Docker engine, emulator agents
that start like the real one (6 s to register, 3 s to a session), the daemon's
default cadence, jobs of 1-5 s that keep coming: a roll-out, a bad build rolled
back, two daemon SIGKILLs restarted 5 s later, two agents killed under their
jobs, 30 s of HTTP 500 then 15 s of 429, a roll-out back; longer steady phases
than the test's. Per run it prints the jobs that ran (the organisation's record),
the history rows (``gpuci-tui history --json``), those recorded after a restart,
and what is missing, twice, extra or with another result; jobs lost and overlaps.

Each run has its own state directory (XDG_*), so the history is the run's alone.
To measure other code (e.g. before a change), run this script and
tests/drills/history_drill.py from that checkout: the daemon is ``python -m
gpuci_tui.cli.main`` of the interpreter and directory this runs in.

Usage: python bench/bench_history_drill.py [--slots 4] [--runs 1] [--steady-jobs 25]
Writes bench/results/history_drill.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
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
from tests.drills.history_drill import Figures, Settings, history_drill  # noqa: E402
from tests.real.rig import build_broken_image, make_rig  # noqa: E402

V2 = "gpuci-bench/history-agent:v2"
#: The issue's run: 5-s restarts, 30 s of HTTP 500, 15 s of 429.
LONG = Settings(
    down=5.0, server_errors=30.0, rate_limited=15.0, retry_after=10.0, daemon="gpuci_tui.cli.main"
)


def one_run(client: Any, images: tuple[str, str, str], slots: int, settings: Settings) -> Figures:
    """One scenario on a fresh organisation, daemon and state directory."""
    startup = (REALISTIC_STARTUP.register, REALISTIC_STARTUP.session)
    with tempfile.TemporaryDirectory(prefix="gpuci-historydrill-") as tmp:
        for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
            os.environ[name] = str(Path(tmp) / name.lower())
        os.environ["XDG_RUNTIME_DIR"] = str(Path(tmp) / "run")
        Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(mode=0o700)
        with contextlib.contextmanager(make_rig)(
            Path(tmp), client, images[0], count=slots, startup=startup, heartbeat_timeout=10.0,
            poll_interval=10.0, backoff_base=2.0, backoff_max=60.0, park_after=5,
            stop_timeout=30.0,
        ) as rig:  # fmt: skip
            return history_drill(rig, images, settings)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--steady-jobs", type=int, default=25)
    parser.add_argument(
        "--out", type=Path, default=ROOT / "bench" / "results" / "history_drill.json"
    )
    args = parser.parse_args()
    client = docker.from_env()
    image = build_emulator_image(client)
    client.images.get(image).tag(V2)
    broken = build_broken_image(client, image)  # its shell says "broken" and exits 1
    began = time.time()
    runs: list[dict[str, Any]] = []
    for n in range(args.runs):
        settings = Settings(
            down=LONG.down, server_errors=LONG.server_errors, rate_limited=LONG.rate_limited,
            retry_after=LONG.retry_after, steady_jobs=args.steady_jobs, job_seconds=(1.0, 5.0),
            seed=28 + n, daemon=LONG.daemon,
        )  # fmt: skip
        got = one_run(client, (image, V2, broken), args.slots, settings)
        print(got.line(), flush=True)
        runs.append(asdict(got))
    report = {
        "machine": machine(),
        "daemon": str(ROOT),
        "wall_s": round(time.time() - began),
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
