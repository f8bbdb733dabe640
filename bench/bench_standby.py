"""Hot standby benchmark: job-to-job gap per slot with realistic agent start-up, on vs off.

The real `gpuci-tui run` on the real Docker engine, agent containers from the busybox
emulator image, and a simulated organisation whose agents take the real agent's time to
start (~6 s of registration, ~3 s until the session; `REALISTIC_STARTUP`). For each slot
count, job length and mode (standby on, standby off), in one invocation:

* gap: a job's end (its finish time) to the start (assignment) of the next queued job on
  the same slot, p50/p95/max;
* makespan vs the ideal ceil(jobs/slots) × job length;
* jobs that overlapped on one slot's agents (must be 0);
* Azure DevOps requests per minute while busy (public API; reads and writes);
* daemon CPU (% of one core, while busy) and RSS.

``--cold``: a fresh organisation with the jobs already queued when the daemon starts, no
lane name registered yet; the makespan is counted from the first job's start (and, as
``makespan_from_start_s``, from the daemon's start, the agents' first start-up included).

Usage: python bench/bench_standby.py [--slots 2 4] [--job-seconds 3 12] [--jobs-per-slot 6]
       [--standby on off N auto] [--cold] [--image REF] [--repeat N] [--out FILE]
Writes bench/results/standby.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

import docker
import psutil
from bench_engine import launch_daemon, machine, make_world, percentile, stop_daemon

from gpuci_tui.sim.image import build_emulator_image
from gpuci_tui.sim.records import REALISTIC_STARTUP

ROOT = Path(__file__).resolve().parent.parent


def slot_of(agent: str) -> int:
    """``prefix-3`` and ``prefix-3-b`` (``-c``, ... with a deeper standby) are slot 3."""
    head, _, tail = agent.rpartition("-")
    return int(tail) if tail.isdigit() else int(head.rsplit("-", 1)[1])


def mode_of(text: str) -> bool | int | str:
    """``--standby`` values: on/true, off/false, a depth, or auto."""
    named: dict[str, bool | str] = {"on": True, "true": True, "off": False, "false": False}
    if text in named:
        return named[text]
    return text if text == "auto" else int(text)


def mode_name(standby: bool | int | str) -> str:
    """How a standby setting reads in the table."""
    if isinstance(standby, bool):
        return "on" if standby else "off"
    return str(standby)


def registrations_per_slot(
    standby: bool | int | str, standby_max: int, standby_min: int, gated: bool
) -> int:
    """The registrations each slot makes before a burst.

    Without the start gate "auto" registers up to its deepest once, while idle; with
    it, only the lanes of its idle depth (the others when a burst wants them).
    """
    if standby == "auto":
        return 1 + (standby_min if gated else standby_max)
    return 1 + int(standby)


def has_start_gate(client: Any, image: str) -> bool:
    """The image's containers wait for the daemon's go (label ``io.gpuci.start-gate=1``)."""
    return (client.images.get(image).labels or {}).get("io.gpuci.start-gate") == "1"


def request_kinds(requests: list[Any]) -> dict[str, int]:
    """The organisation's public requests by kind (route and query)."""
    kinds: dict[str, int] = {}
    for e in requests:
        if e.method != "GET":
            kind = f"{e.method} agent"
        elif e.route.endswith("/agents"):
            kind = "agent by name" if "agentName=" in e.detail else "agents list"
        elif e.route.endswith("{agentId}"):
            kind = "agent re-read"
        elif e.route.endswith("/jobrequests"):
            kind = "agent's last job" if "agentId=" in e.detail else "queue"
        else:
            kind = e.route.rsplit("/", 1)[-1] or e.route
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def one_run(
    client: Any,
    image: str,
    *,
    slots: int,
    job_seconds: float,
    jobs_per_slot: int,
    standby: bool | int | str,
    standby_max: int = 3,
    standby_min: int = 1,
    cold: bool = False,
) -> dict[str, Any]:
    """One mode on one scenario, with a fresh organisation and daemon."""
    world = make_world(
        slots,
        10.0,
        "sb",
        client=client,
        image=image,
        heartbeat_timeout=15.0,
        startup=REALISTIC_STARTUP,
        standby=standby,
        standby_max=standby_max,
        standby_min=standby_min,
    )
    org, pool_id, server, work, config = (
        world.org, world.pool_id, world.server, world.work, world.config
    )  # fmt: skip
    gated = has_start_gate(client, image)
    per_slot = 1 + (standby_min if standby == "auto" else int(standby))
    registered = slots * registrations_per_slot(standby, standby_max, standby_min, gated)
    # What the configuration allows ("auto": its deepest, plus one).
    cap = slots * (1 + (standby_max if standby == "auto" else int(standby)))
    most_registered = 0
    ids: list[int] = []
    if cold:  # the queue is there before the first agent: no lane name registered yet
        ids = [org.queue_job(pool_id, duration=job_seconds) for _ in range(slots * jobs_per_slot)]
    daemon_started = time.time()
    daemon = launch_daemon(world)
    try:
        started = time.monotonic()
        # Steady state: every slot's agent online and enabled (and its standby online),
        # and with "auto" every registration it makes while idle.
        while not cold:
            agents = org.agents(pool_id)
            online = [a for a in agents if a.online]
            enabled = [a for a in online if a.enabled]
            ready = len(online) >= slots * per_slot and len(enabled) >= slots
            running = client.containers.list(filters={"name": config.agents.name_prefix})
            if (
                ready
                and len(agents) >= registered
                and len(online) == slots * per_slot
                and len(running) == slots * per_slot  # "auto": its extra lanes stopped again
            ):
                break
            if time.monotonic() - started > 120 or daemon.poll() is not None:
                raise SystemExit(f"agents did not come up; see {work / 'daemon.log'}")
            time.sleep(0.05)
        steady_after = time.monotonic() - started
        proc = psutil.Process(daemon.pid)
        cpu0 = proc.cpu_times()
        busy_since = daemon_started if cold else time.time()
        if not cold:
            ids = [
                org.queue_job(pool_id, duration=job_seconds) for _ in range(slots * jobs_per_slot)
            ]
        while any(org.job(i).result is None for i in ids):
            if daemon.poll() is not None:
                raise SystemExit("daemon died")
            most_registered = max(most_registered, len(org.agents(pool_id)))
            time.sleep(0.05)
        busy = time.time() - busy_since
        cpu1 = proc.cpu_times()
        rss_mib = proc.memory_info().rss / 2**20
        jobs = [org.job(i) for i in ids]
        requests = [e for e in org.request_log(since=busy_since) if not e.private]
        writes = [e for e in requests if e.method != "GET"]
        # Per job: the history's read of the agent's last job; the rest is the pool poll.
        per_job_reads = [e for e in requests if e.method == "GET" and "agentId=" in e.detail]
        rereads = [e for e in requests if e.method == "GET" and e.route.endswith("{agentId}")]
    finally:
        stop_daemon(daemon, client, config)
        server.stop()
    by_slot: dict[int, list[Any]] = {}
    for job in jobs:
        assert job.agent_name is not None
        by_slot.setdefault(slot_of(job.agent_name), []).append(job)
    gaps: list[float] = []
    overlaps = 0
    for slot_jobs in by_slot.values():
        slot_jobs.sort(key=lambda j: j.assign_time)
        for done, nxt in zip(slot_jobs, slot_jobs[1:], strict=False):
            gaps.append(nxt.assign_time - done.finish_time)
            overlaps += nxt.assign_time < done.finish_time
    makespan_from_start = max(j.finish_time for j in jobs) - busy_since
    first_start = min(j.assign_time for j in jobs)
    makespan = max(j.finish_time for j in jobs) - (first_start if cold else busy_since)
    ideal = math.ceil(len(ids) / slots) * job_seconds
    minutes = busy / 60
    return {
        "cold": cold,
        "start_gate": gated,
        "makespan_from_start_s": round(makespan_from_start, 1),
        "requests_by_kind": request_kinds(requests),
        "standby": standby,
        "standby_min": standby_min if standby == "auto" else None,
        "registered_agents_max": most_registered,
        "registered_agents_cap": cap,
        "slots": slots,
        "job_seconds": job_seconds,
        "jobs": len(ids),
        "steady_after_s": round(steady_after, 1),
        "gap_s": {
            "n": len(gaps),
            "p50": round(statistics.median(gaps), 2),
            "p95": round(percentile(gaps, 95), 2),
            "max": round(max(gaps), 2),
        },
        "makespan_s": round(makespan, 1),
        "ideal_makespan_s": round(ideal, 1),
        "makespan_over_ideal": round(makespan / ideal, 2),
        "jobs_overlapping_on_a_slot": overlaps,
        "jobs_not_succeeded": sum(1 for j in jobs if j.result != "succeeded"),
        "azure_requests_per_min": round(len(requests) / minutes, 1),
        "azure_reads_per_min": round((len(requests) - len(writes)) / minutes, 1),
        "azure_poll_reads_per_min": round(
            (len(requests) - len(writes) - len(per_job_reads) - len(rereads)) / minutes, 1
        ),
        "azure_history_reads_per_job": round(len(per_job_reads) / len(ids), 2),
        "azure_rereads_per_job": round(len(rereads) / len(ids), 2),
        "azure_writes_per_job": round(len(writes) / len(ids), 2),
        "daemon_cpu_pct_busy": round(
            (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / busy * 100, 2
        ),
        "daemon_rss_mib": round(rss_mib, 1),
    }


def table(runs: list[dict[str, Any]]) -> str:
    """The Markdown table of BENCHMARKS.md."""
    head = (
        "| slots | job | standby | gap p50 / p95 / max | makespan (ideal) | overlaps "
        "| Azure req/min | poll reads/min | per job: writes + reads | CPU busy | RSS | agents (cap) |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    )
    rows = []
    for r in runs:
        g = r["gap_s"]
        rows.append(
            f"| {r['slots']} | {r['job_seconds']:g} s | {mode_name(r['standby'])}"
            f"{'' if r.get('standby_min') in (None, 1) else ' (min ' + str(r['standby_min']) + ')'} "
            f"| {g['p50']} / {g['p95']} / {g['max']} s "
            f"| {r['makespan_s']} s ({r['ideal_makespan_s']} s, {r['makespan_over_ideal']}×) "
            f"| {r['jobs_overlapping_on_a_slot']} "
            f"| {r['azure_requests_per_min']} | {r['azure_poll_reads_per_min']} "
            f"| {r['azure_writes_per_job']} + "
            f"{r['azure_history_reads_per_job'] + r['azure_rereads_per_job']:.2f} "
            f"| {r['daemon_cpu_pct_busy']} % "
            f"| {r['daemon_rss_mib']} MiB "
            f"| {r['registered_agents_max']} ({r['registered_agents_cap']}) |"
        )
    return head + "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--slots", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--job-seconds", type=float, nargs="+", default=[3.0, 12.0])
    parser.add_argument("--jobs-per-slot", type=int, default=6)
    parser.add_argument(
        "--standby", type=mode_of, nargs="+", default=[True, False], help="on off N auto"
    )
    parser.add_argument("--standby-max", type=int, default=3, help='with "auto"')
    parser.add_argument("--standby-min", type=int, default=1, help='with "auto"')
    parser.add_argument("--repeat", type=int, default=1, help="runs of each mode, alternated")
    parser.add_argument("--cold", action="store_true", help="jobs queued before the daemon starts")
    parser.add_argument("--image", help="an agent image already built (default: the emulator)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "standby.json")
    args = parser.parse_args()
    client = docker.from_env()
    image = args.image or build_emulator_image(client)
    runs = []
    began = time.time()
    for job_seconds in args.job_seconds:
        for slots in args.slots:
            for _ in range(args.repeat):
                for standby in args.standby:
                    result = one_run(
                        client,
                        image,
                        slots=slots,
                        job_seconds=job_seconds,
                        jobs_per_slot=args.jobs_per_slot,
                        standby=standby,
                        standby_max=args.standby_max,
                        standby_min=args.standby_min,
                        cold=args.cold,
                    )
                    print(json.dumps(result), flush=True)
                    runs.append(result)
    out = {
        "machine": machine(),
        "agent_startup_s": {
            "register": REALISTIC_STARTUP.register,
            "session": REALISTIC_STARTUP.session,
        },
        "wall_time_s": round(time.time() - began),
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(table(runs))


if __name__ == "__main__":
    main()
