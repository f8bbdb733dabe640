"""Soak on the real path: `gpuci-tui run` on Docker, agents from the busybox emulator image,
the simulated organisation over HTTP on 127.0.0.1 — bounded by time, not by job count.

The companion of bench_soak.py (10,000 jobs in-process): this one exercises what
that one leaves out — the Docker client and its events thread, the Azure DevOps
HTTP client — at the pace Docker allows on this machine (about a job a second),
and samples the daemon process's RSS, descriptors and threads every
``--sample-every`` jobs, each time with no job in flight and every slot idle.
The simulation runs in this process, so nothing of it counts in the daemon's RSS.

Usage: nice -n 10 python bench/bench_soak_docker.py [--slots 4] [--minutes 10]
Writes bench/results/soak_docker.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import psutil
from bench_engine import launch_daemon, machine, make_world, stop_daemon

from gpuci_tui.sim.org import SimOrg

ROOT = Path(__file__).resolve().parent.parent


def sample(proc: psutil.Process, jobs: int, started: float) -> dict[str, Any]:
    return {
        "jobs": jobs,
        "seconds": round(time.monotonic() - started, 1),
        "rss_mib": round(proc.memory_info().rss / 2**20, 2),
        "fds": proc.num_fds(),
        "threads": proc.num_threads(),
    }


def idle(org: SimOrg, pool_id: int, slots: int) -> bool:
    agents = [a for a in org.agents(pool_id) if a.online and a.enabled]
    return len(agents) >= slots and not any(a.assigned_request for a in agents)


def run(args: argparse.Namespace) -> dict[str, Any]:
    world = make_world(args.slots, 2.0, prefix="soak")
    org, pool_id = world.org, world.pool_id
    daemon = launch_daemon(world)
    samples: list[dict[str, Any]] = []
    try:
        proc = psutil.Process(daemon.pid)
        started = time.monotonic()
        end = started + args.minutes * 60
        done, next_sample, outstanding = 0, 0, set[int]()
        while time.monotonic() < end:
            if daemon.poll() is not None:
                raise SystemExit(f"the daemon died; see {world.work / 'daemon.log'}")
            quiet = done >= next_sample
            while not quiet and len(outstanding) < 2 * args.slots:
                outstanding.add(org.queue_job(pool_id, duration=args.job_seconds))
            for request_id in list(outstanding):
                if org.job(request_id).result is not None:
                    outstanding.discard(request_id)
                    done += 1
            if quiet and not outstanding and idle(org, pool_id, args.slots):
                next_sample += args.sample_every
                samples.append(sample(proc, done, started))
                print(json.dumps(samples[-1]), flush=True)
            time.sleep(0.05)
        lost = [j.request_id for j in org.jobs(pool_id) if j.result not in (None, "succeeded")]
    finally:
        stop_daemon(daemon, world.client, world.config)
        world.server.stop()
    return {"machine": machine(), "samples": samples, "jobs_not_succeeded": len(lost)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--job-seconds", type=float, default=0.2)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--sample-every", type=int, default=100)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "soak_docker.json"))
    args = parser.parse_args()
    result = run(args)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
