"""The organisation's bill: what one daemon's calls cost Azure DevOps, with and without a crowd.

`gpuci-tui run` on the real Docker engine (agents from the busybox emulator image,
4 slots, the default hot standby, the default 10-s poll), against the simulated
organisation over HTTP on 127.0.0.1 (in this process, so none of it counts against
the daemon), with N agents of *other* hosts in the same pool (`sim.foreign`: an
online/offline mix, ~1.4 KB each with capabilities). Two windows each:

* idle: no job for ``--minutes``;
* busy: the queue kept at two jobs per slot, jobs of ``--job-seconds``, for ``--minutes``.
  The jobs demand this host (``GPUCI_HOST -equals HOST``), as jobs meant for a set of
  hosts do: a job every agent of the pool could take makes the service list all of
  them in its ``matchedAgents`` (measured apart: ``queued_job_matching_all_bytes``).

Figures per window, from the organisation's own request log (every public request and
the bytes of its answer) and the daemon's CPU time (user + system, /proc): requests per
minute, agent-list calls per minute, bytes per agent list, MB received per minute,
daemon CPU seconds per minute, jobs per minute; and once per run the rarer reads (the
hourly check of this host's agents with capabilities, the whole pool's names every six
hours) and what they cost a minute, spread over their interval.

Usage: python bench/bench_org_bill.py [--foreign 0,5000] [--minutes 3] [--job-seconds 3]
       [--slots 4] [--label NAME] [--out FILE]
Writes bench/results/org_bill.json (one entry per --label) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import requests
from bench_engine import World, launch_daemon, machine, make_world, stop_daemon

from gpuci_tui.core.config.loader import instance_id
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.host.observers.pool_reads import NAMES_INTERVAL
from gpuci_tui.core.host.observers.read_times import CAPABILITIES_INTERVAL
from gpuci_tui.sim.foreign import add_foreign_agents
from gpuci_tui.sim.records import RequestLogEntry

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "bench" / "results" / "org_bill.json"
AGENTS_ROUTE = "/_apis/distributedtask/pools/{poolId}/agents"
JOBS_ROUTE = "/_apis/distributedtask/pools/{poolId}/jobrequests"
WARM_UP = 240.0


def cpu_seconds(proc: psutil.Process) -> float:
    """The daemon's own CPU time so far (user + system)."""
    times = proc.cpu_times()
    return float(times.user + times.system)


def window(entries: list[RequestLogEntry], seconds: float, cpu: float) -> dict[str, Any]:
    """One window's figures from the organisation's request log."""
    minutes = seconds / 60.0
    public = [e for e in entries if not e.private]
    lists = [e for e in public if e.route == AGENTS_ROUTE]
    # The queue (completedRequestCount=0) apart from a finished job's row (agentId=…).
    jobs = [e for e in public if e.route == JOBS_ROUTE]
    queue = [e for e in jobs if "agentId=" not in e.detail]
    history = [e for e in jobs if "agentId=" in e.detail]
    received = sum(e.size for e in public)
    return {
        "seconds": round(seconds, 1),
        "requests_per_min": round(len(public) / minutes, 1),
        "agent_lists_per_min": round(len(lists) / minutes, 1),
        "bytes_per_list": round(sum(e.size for e in lists) / len(lists)) if lists else None,
        "queue_reads_per_min": round(len(queue) / minutes, 1),
        "bytes_per_queue_read": round(sum(e.size for e in queue) / len(queue)) if queue else None,
        "history_reads_per_min": round(len(history) / minutes, 1),
        "writes_per_min": round(sum(e.method != "GET" for e in public) / minutes, 1),
        "mb_received_per_min": round(received / 1e6 / minutes, 3),
        "daemon_cpu_s_per_min": round(cpu / minutes, 2),
    }


def ours_online(world: World) -> int:
    prefix = world.config.agents.name_prefix
    return sum(1 for a in world.org.agents(world.pool_id) if a.online and a.name.startswith(prefix))


def keep_queue_full(world: World, outstanding: set[int], depth: int, args: Any) -> int:
    """Queue jobs for this host up to ``depth`` outstanding; returns how many finished."""
    finished = 0
    for request_id in list(outstanding):
        if world.org.job(request_id).result is not None:
            outstanding.discard(request_id)
            finished += 1
    while len(outstanding) < depth:
        demand = f"GPUCI_HOST -equals {socket.gethostname()}"
        outstanding.add(
            world.org.queue_job(world.pool_id, duration=args.job_seconds, demands=(demand,))
        )
    return finished


def measure(foreign: int, args: argparse.Namespace) -> dict[str, Any]:
    poll = SupervisorConfig().poll_interval
    world = make_world(args.slots, poll, prefix=f"bill{foreign}")
    add_foreign_agents(world.org, world.pool_id, foreign)
    daemon: subprocess.Popen[bytes] = launch_daemon(world)
    outstanding: set[int] = set()
    try:
        proc = psutil.Process(daemon.pid)
        deadline = time.monotonic() + WARM_UP
        while ours_online(world) < 2 * args.slots:  # each slot: its agent and its standby
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise SystemExit(f"agents did not come online; see {world.work / 'daemon.log'}")
            time.sleep(0.2)
        time.sleep(15)  # the start's reads (the whole pool once) are behind us
        # Idle: nothing queued.
        cpu0, t0 = cpu_seconds(proc), time.time()
        time.sleep(args.minutes * 60)
        cpu1, t1 = cpu_seconds(proc), time.time()
        idle = window(world.org.request_log(since=t0), t1 - t0, cpu1 - cpu0)
        # Busy: the queue kept at two jobs per slot (warm-up until every slot served one).
        warm = 0
        until = time.monotonic() + WARM_UP
        while warm < args.slots:
            if time.monotonic() > until or daemon.poll() is not None:
                raise SystemExit(f"no jobs served; see {world.work / 'daemon.log'}")
            warm += keep_queue_full(world, outstanding, 2 * args.slots, args)
            time.sleep(0.05)
        cpu2, t2, done = cpu_seconds(proc), time.time(), 0
        end = time.monotonic() + args.minutes * 60
        while time.monotonic() < end:
            if daemon.poll() is not None:
                raise SystemExit(f"the daemon died; see {world.work / 'daemon.log'}")
            done += keep_queue_full(world, outstanding, 2 * args.slots, args)
            time.sleep(0.05)
        cpu3, t3 = cpu_seconds(proc), time.time()
        busy = window(world.org.request_log(since=t2), t3 - t2, cpu3 - cpu2)
        busy["jobs_per_min"] = round(done / ((t3 - t2) / 60), 1)
        matching_all = queued_job_matching_all(world) if foreign else 0
        rarer = checks(world)
        ours = f"GPUCI_INSTANCE -equals {instance_id(world.config)}"
        last_completed = get(world, "agents", includeAssignedRequest="true", demands=ours)
        last_completed = (
            get(
                world,
                "agents",
                includeAssignedRequest="true",
                includeLastCompletedRequest="true",
                demands=ours,
            )
            - last_completed
        )
    finally:
        stop_daemon(daemon, world.client, world.config)
        world.server.stop()
    return {
        "foreign_agents": foreign,
        "idle": idle,
        "busy": busy,
        **rarer,
        "queued_job_matching_all_bytes": matching_all,
        "last_completed_bytes_per_list": last_completed,
    }


def get(world: World, resource: str, **params: str) -> int:
    """The bytes of one answer of the organisation, read with the run's PAT."""
    url = f"{world.server.org_url}/_apis/distributedtask/pools/{world.pool_id}/{resource}"
    pat = (world.work / "pat").read_text().strip()
    reply = requests.get(url, params=params, auth=("", pat), timeout=120)
    reply.raise_for_status()
    return len(reply.content)


def checks(world: World) -> dict[str, Any]:
    """The bytes of the daemon's rarer reads, and what they cost a minute, spread out: this
    host's agents with capabilities and ours as the filter gives them (hourly), the whole
    pool's names (every six hours); beside them, one read of the whole pool with
    capabilities (what the hourly check was before)."""
    ours = f"GPUCI_INSTANCE -equals {instance_id(world.config)}"
    host = f"GPUCI_HOST -equals {socket.gethostname()}"
    both = {"includeAssignedRequest": "true", "includeLastCompletedRequest": "true"}
    hourly = get(world, "agents", **both, includeCapabilities="true", demands=host)
    hourly += get(world, "agents", **both, demands=ours)
    names = get(world, "agents", includeAssignedRequest="true")
    spread = hourly / (CAPABILITIES_INTERVAL / 60) + names / (NAMES_INTERVAL / 60)
    return {
        "hourly_check_bytes": hourly,
        "names_read_bytes": names,
        "checks_mb_per_min_spread": round(spread / 1e6, 4),
        "whole_pool_with_capabilities_bytes": get(
            world, "agents", **both, includeCapabilities="true"
        ),
    }


def queued_job_matching_all(world: World) -> int:
    """The bytes one queued job that every other host's agent could take adds to a queue read.

    It demands what they all report and ours do not (``gpu.count``: ours run without
    GPUs here), so it stays queued and the service lists them all in ``matchedAgents``.
    """
    before = get(world, "jobrequests", completedRequestCount="0")
    request = world.org.queue_job(world.pool_id, duration=1.0, demands=("gpu.count",))
    try:
        return get(world, "jobrequests", completedRequestCount="0") - before
    finally:
        world.org.cancel_job(request)


def table(entries: list[dict[str, Any]]) -> str:
    rows = [
        "| N other agents | window | requests/min | agent-list calls/min | bytes per list "
        "| MB/min received | daemon CPU s/min |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for entry in entries:
        for name in ("idle", "busy"):
            w = entry[name]
            jobs = f" ({w['jobs_per_min']:.0f} jobs/min)" if "jobs_per_min" in w else ""
            rows.append(
                f"| {entry['foreign_agents']:,} | {name}{jobs} | {w['requests_per_min']:.0f} "
                f"| {w['agent_lists_per_min']:.0f} | {(w['bytes_per_list'] or 0) / 1000:.1f} KB "
                f"| {w['mb_received_per_min']:.2f} | {w['daemon_cpu_s_per_min']:.2f} |"
            )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--foreign", default="0,5000", help="agents of other hosts, comma-separated"
    )
    parser.add_argument("--minutes", type=float, default=3.0, help="length of each window")
    parser.add_argument("--job-seconds", type=float, default=3.0)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--label", default="current")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args()
    entries = [measure(int(n), args) for n in args.foreign.split(",")]
    result = {"label": args.label, "machine": machine(), "slots": args.slots,
              "job_seconds": args.job_seconds, "runs": entries}  # fmt: skip
    out = Path(args.out)
    kept = json.loads(out.read_text()) if out.exists() else []
    kept = [e for e in kept if e.get("label") != args.label] + [result]
    out.write_text(json.dumps(kept, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(table(entries))


if __name__ == "__main__":
    main()
