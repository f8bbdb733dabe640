"""Per-job cost of the daemon: CPU seconds, Docker API calls and Azure DevOps requests per job.

`gpuci-tui run` on the real Docker engine, agents from the busybox emulator image,
the simulated organisation over HTTP on 127.0.0.1 (in this process, so none of
it counts against the daemon). The queue is kept at two jobs per slot for
``--minutes``; after a warm-up (every slot served a job) the daemon's own CPU
time (user + system, from /proc, its children excluded: it has none) is read at
the start and the end of the measured window, and the jobs that finished in
between are counted. The organisation's public requests in the window are counted by
kind (agents list, agent by name, re-read, PATCH, queue, a finished job's read) per
job, and, with ``--idle-minutes``, per minute while the host is idle afterwards (every
job done, the slots ready). ``--startup``: agents take the real agent's start-up
(~6 s to register, ~3 s to the session) instead of the organisation's default.

Usage: python bench/bench_job_cost.py [--slots 4] [--job-seconds 1] [--minutes 8]
       [--idle-minutes 0] [--startup] [--image REF] [--label NAME] [--out FILE]
Writes bench/results/job_cost.json (a list: one entry per --label, replaced when
the label is run again) and prints the entry.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
from bench_engine import launch_daemon, machine, make_world, stop_daemon
from bench_standby import request_kinds

from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.records import REALISTIC_STARTUP

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "bench" / "results" / "job_cost.json"


def cpu_seconds(proc: psutil.Process) -> float:
    """The daemon's own CPU time so far (user + system)."""
    times = proc.cpu_times()
    return float(times.user + times.system)


def keep_queue_full(
    org: SimOrg, pool_id: int, outstanding: set[int], depth: int, secs: float
) -> int:
    """Queue jobs up to ``depth`` outstanding; returns how many finished since the last call."""
    finished = 0
    for request_id in list(outstanding):
        if org.job(request_id).result is not None:
            outstanding.discard(request_id)
            finished += 1
    while len(outstanding) < depth:
        outstanding.add(org.queue_job(pool_id, duration=secs))
    return finished


def docker_calls(log: Path) -> int | None:
    """The daemon's own count of Docker API calls, logged when it stops."""
    found = re.findall(r"docker api calls: (\d+)", log.read_text(errors="replace"))
    return int(found[-1]) if found else None


def public(org: SimOrg, since: float, until: float | None = None) -> list[Any]:
    """The organisation's public requests (not the agents' own) in a window."""
    return [
        e
        for e in org.request_log(since=since)
        if not e.private and (until is None or e.at <= until)
    ]


def run(args: argparse.Namespace) -> dict[str, Any]:
    startup = REALISTIC_STARTUP if args.startup else None
    world = make_world(args.slots, 10.0, prefix="cost", image=args.image, startup=startup)
    org, pool_id = world.org, world.pool_id
    daemon: subprocess.Popen[bytes] = launch_daemon(world)
    outstanding: set[int] = set()
    try:
        proc = psutil.Process(daemon.pid)
        warm_until = time.monotonic() + 120
        warm = 0
        while warm < 2 * args.slots:
            if time.monotonic() > warm_until:
                raise SystemExit(f"no jobs served in 120 s; see {world.work / 'daemon.log'}")
            warm += keep_queue_full(org, pool_id, outstanding, 2 * args.slots, args.job_seconds)
            time.sleep(0.05)
        cpu0, t0, done = cpu_seconds(proc), time.monotonic(), 0
        wall0 = time.time()
        end = t0 + args.minutes * 60
        while time.monotonic() < end:
            if daemon.poll() is not None:
                raise SystemExit(f"the daemon died; see {world.work / 'daemon.log'}")
            done += keep_queue_full(org, pool_id, outstanding, 2 * args.slots, args.job_seconds)
            time.sleep(0.05)
        cpu1, t1 = cpu_seconds(proc), time.monotonic()
        wall1 = time.time()
        rss = proc.memory_info().rss / 2**20
        busy = public(org, wall0, wall1)
        idle: list[Any] = []
        idle_minutes = 0.0
        if args.idle_minutes > 0:
            # Idle: the queue is left to drain, then the host is watched doing nothing.
            deadline = time.monotonic() + 120
            while any(org.job(r).result is None for r in outstanding):
                if time.monotonic() > deadline:
                    raise SystemExit("the queue did not drain")
                time.sleep(0.1)
            time.sleep(30)  # the last jobs' confirmations and restarts
            idle0 = time.time()
            time.sleep(args.idle_minutes * 60)
            idle = public(org, idle0)
            idle_minutes = (time.time() - idle0) / 60
        failed = [j for j in org.jobs(pool_id) if j.result not in (None, "succeeded")]
    finally:
        stop_daemon(daemon, world.client, world.config)
        world.server.stop()
    calls = docker_calls(world.work / "daemon.log")
    total_jobs = warm + done
    return {
        "label": args.label,
        "machine": machine(),
        "slots": args.slots,
        "job_seconds": args.job_seconds,
        "window_seconds": round(t1 - t0, 1),
        "jobs_in_window": done,
        "jobs_per_minute": round(done / ((t1 - t0) / 60), 1),
        "daemon_cpu_seconds": round(cpu1 - cpu0, 2),
        "daemon_cpu_ms_per_job": round(1000 * (cpu1 - cpu0) / max(done, 1), 1),
        "daemon_cpu_percent_of_a_core": round(100 * (cpu1 - cpu0) / (t1 - t0), 1),
        "docker_api_calls_per_job": round(calls / total_jobs, 2) if calls and total_jobs else None,
        "azure_requests_per_job": round(len(busy) / max(done, 1), 2),
        "azure_requests_per_job_by_kind": {
            kind: round(count / max(done, 1), 2) for kind, count in request_kinds(busy).items()
        },
        "azure_requests_per_min_busy": round(len(busy) / ((t1 - t0) / 60), 1),
        "azure_requests_per_min_idle": round(len(idle) / idle_minutes, 1) if idle_minutes else None,
        "azure_idle_by_kind": request_kinds(idle),
        "rss_mib_end": round(rss, 1),
        "jobs_not_succeeded": len(failed),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--job-seconds", type=float, default=1.0)
    parser.add_argument("--minutes", type=float, default=8.0)
    parser.add_argument("--idle-minutes", type=float, default=0.0)
    parser.add_argument("--startup", action="store_true", help="the real agent's start-up")
    parser.add_argument("--image", help="an agent image already built (default: the emulator)")
    parser.add_argument("--label", default="current")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args()
    result = run(args)
    out = Path(args.out)
    entries = json.loads(out.read_text()) if out.exists() else []
    entries = [e for e in entries if e.get("label") != args.label] + [result]
    out.write_text(json.dumps(entries, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
