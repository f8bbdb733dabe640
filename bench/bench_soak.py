"""Soak benchmark: does the daemon's memory stay flat over thousands of jobs?

Runs the daemon's own `daemon.serve` (supervisor, control socket, metrics
endpoint on loopback, job history in SQLite, job recorder) in this process,
against the simulated organisation through `SimPoolApi` and the in-process
`SimulatedRuntime` (agents are threads; each takes one job and exits, like the
real single-job agent). Docker is left out on purpose: a container start costs
~1 s on a loaded machine, so 10,000 jobs would take hours; what grows per job is
the daemon's bookkeeping, which this exercises identically. Not exercised: the
Docker client (its per-container detail cache is bounded by a size already)
and GPU accounting (no GPU processes to attribute).

The simulated outside world lives in the same process, so the harness prunes
its records (finished jobs, exited containers, request log) every 100 jobs: what
remains to grow is the daemon's. Samples are taken with no job in flight and
every slot's agent idle. Every ``--sample-every`` jobs it records RSS, descriptors and
threads (and, with ``--tracemalloc``, which lines of gpuci_tui hold more memory
than at the previous sample: that is how the leaks were found).

Usage: python bench/bench_soak.py [--jobs N] [--slots S] [--job-seconds T] [--tracemalloc]
Writes bench/results/soak.json (or --out) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import socket
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuci_tui.core.config.loader import (  # noqa: E402
    AgentsConfig,
    AzureConfig,
    Config,
    MetricsConfig,
)
from gpuci_tui.core.engine.settings import SupervisorConfig  # noqa: E402
from gpuci_tui.core.host import memory  # noqa: E402
from gpuci_tui.core.host.daemon import DaemonPaths, serve  # noqa: E402
from gpuci_tui.core.host.memory import limit_arenas  # noqa: E402
from gpuci_tui.core.host.observers import history_book  # noqa: E402
from gpuci_tui.sim.api import SimPoolApi  # noqa: E402
from gpuci_tui.sim.org import SimOrg  # noqa: E402
from gpuci_tui.sim.runtime import DEFAULT_IMAGE, SimulatedRuntime  # noqa: E402

PAT = "soak-pat-0123456789abcdefghijklmnopqrstuvwxyz0123456789"
MIB = 1 << 20


class Tokens:
    def get_token(self, org_url: str) -> str:
        return PAT


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def prune_world(org: SimOrg, runtime: SimulatedRuntime, before: float) -> None:
    """Forget the simulation's finished jobs and exited containers (not the daemon's state)."""
    with org._lock:
        for request_id, job in list(org._jobs.items()):
            if job.finish_time is not None and job.finish_time < before:
                del org._jobs[request_id]
    with runtime._lock:
        del runtime._history[:-50]
    with org.stats._lock:
        org.stats._log.clear()


async def settle(supervisor: Any, slots: int, seconds: float) -> None:
    """Wait until every slot shows an idle agent, then ``seconds`` more (trims included)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while [s.state for s in supervisor.snapshot().slots] != ["idle"] * slots:
        if loop.time() > deadline:
            raise RuntimeError(
                "the slots did not all become idle within 60 s: "
                + "; ".join(f"{s.name} {s.state} {s.message}" for s in supervisor.snapshot().slots)
            )
        await asyncio.sleep(0.05)
    await asyncio.sleep(seconds)


def heap_bytes(snapshot: tracemalloc.Snapshot) -> int:
    """The heap the daemon holds at ``snapshot``, tracemalloc's own snapshots left out.

    Not `tracemalloc.get_traced_memory`: that counts the snapshots this harness keeps
    (the previous one and the new one, each a list as long as the traces), whose size
    swings by hundreds of KiB from sample to sample and hid or faked a leak.
    """
    own = snapshot.filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    return sum(stat.size for stat in own.statistics("filename"))


def top_growth(old: tracemalloc.Snapshot, new: tracemalloc.Snapshot, count: int = 12) -> list[str]:
    """Allocation sites holding more memory now than at ``old`` (biggest first)."""
    stats = new.compare_to(old, "traceback")
    return [
        f"{s.size_diff / 1024:+8.1f} KiB {s.count_diff:+6d} blocks  "
        + " < ".join(
            f"{'/'.join(f.filename.split('/')[-2:])}:{f.lineno}" for f in reversed(s.traceback)
        )
        for s in stats[:count]
        if s.size_diff > 0
    ]


#: The history book's windows at the soak's pace (the product's: GRACE 30 s, RECENT 900 s,
#: MAX_WAIT 300 s, MARGIN 120 s, MARK_STEP 30 s).
SCALED_WINDOWS = {"GRACE": 1.0, "RECENT": 6.0, "MAX_WAIT": 3.0, "MARGIN": 1.0, "MARK_STEP": 1.0}


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    """Run the soak; with ``args.tracemalloc``, trace allocations for its length only.

    Tracing is stopped again at the end: left on, it slowed everything else the process
    ran ~4x (the memory audit runs early in the test suite, which it slowed for the rest).
    """
    tracing = args.tracemalloc and not tracemalloc.is_tracing()
    if tracing:
        tracemalloc.start(args.frames)
    # The history book keeps each job for minutes (a late container end, the look-back):
    # bounded by time, not a leak, but at this soak's ~30 jobs/s it is ~27,000 jobs. Its
    # windows are scaled to the soak's pace (0.02-s jobs instead of minutes), so that the
    # heap after warm-up is the steady state, and a job kept for good still shows.
    windows = {name: getattr(history_book, name) for name in SCALED_WINDOWS}
    for name, seconds in SCALED_WINDOWS.items():
        setattr(history_book, name, seconds)
    try:
        return await _soak(args)
    finally:
        for name, seconds in windows.items():
            setattr(history_book, name, seconds)
        if tracing:
            tracemalloc.stop()


async def _soak(args: argparse.Namespace) -> dict[str, Any]:
    org = SimOrg("soak", heartbeat_timeout=10.0)
    org.add_pat(PAT)
    pool_id = org.add_pool("gpu")
    runtime = SimulatedRuntime(org, destroy_delay=0.02)
    port = free_port()
    config = Config(
        azure=AzureConfig(url="https://sim.invalid/soak", pool="gpu"),
        agents=AgentsConfig(count=args.slots, image=DEFAULT_IMAGE, name_prefix="soak", gpus="none"),
        supervisor=SupervisorConfig(
            poll_interval=0.5, backoff_base=0.05, backoff_max=0.5, park_after=5, stop_timeout=5
        ),
        metrics=MetricsConfig("" if getattr(args, "no_metrics", False) else f"127.0.0.1:{port}"),
    )
    state = Path(tempfile.mkdtemp(prefix="gpuci-soak-"))
    paths = DaemonPaths(
        socket=Path(tempfile.mkdtemp(prefix="gs-", dir="/tmp")) / "s.sock",
        lock=state / "lock",
        intent=state / "intent.json",
        history=state / "history.sqlite3",
        agents=state / "agents",
    )
    holder: dict[str, Any] = {}
    up = asyncio.Event()
    daemon = asyncio.create_task(
        serve(
            config,
            api=SimPoolApi(org, PAT),
            runtime=runtime,
            tokens=Tokens(),
            paths=paths,
            ready=lambda sup, server: (holder.update(sup=sup), up.set()),
        )  # fmt: skip
    )
    await asyncio.wait_for(up.wait(), 60)
    samples: list[dict[str, Any]] = []
    growth: list[dict[str, Any]] = []
    outstanding: set[int] = set()
    done = 0
    started = time.monotonic()
    snapshot = None
    if args.tracemalloc:
        snapshot = tracemalloc.take_snapshot()
    # The test's soak takes no sample before its warm-up (each costs a settle and a snapshot).
    next_sample = getattr(args, "first_sample", 0)
    next_prune = 0
    while next_sample <= args.jobs:
        quiet = done >= next_sample  # a sample is due: let the jobs in flight finish first
        while (
            not quiet and len(outstanding) < 2 * args.slots and done + len(outstanding) < args.jobs
        ):
            outstanding.add(org.queue_job(pool_id, duration=args.job_seconds))
        await asyncio.sleep(0.02)
        if done >= next_prune:  # keep the simulation's own records small all along
            next_prune = done + 100
            prune_world(org, runtime, time.time() - 1.0)
        for request_id in list(outstanding):
            with org._lock:
                job = org._jobs.get(request_id)
            if job is not None and job.result is not None:
                outstanding.discard(request_id)
                done += 1
        if quiet and not outstanding:
            next_sample += args.sample_every
            # Same state at every sample: no job in flight, every slot's agent idle.
            await settle(holder["sup"], args.slots, args.settle)
            prune_world(org, runtime, time.time())
            sample = {
                "jobs": done,
                "seconds": round(time.monotonic() - started, 1),
                "rss_mib": round(rss() / MIB, 2),
                "fds": fds(),
                "threads": threads(),
            }
            # After the figures: the scrape's client socket is the harness's, not the daemon's.
            sample["scrape"] = 0
            if config.metrics.listen:
                sample["scrape"] = await asyncio.to_thread(
                    lambda: requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).status_code
                )
            if snapshot is not None:
                # A leak is memory still reachable: garbage waiting for the cycle collector
                # is not, and moved the heap by ±150 KiB from sample to sample (±10 after).
                gc.collect()
                new = tracemalloc.take_snapshot()
                sample["traced_mib"] = round(heap_bytes(new) / MIB, 2)
                growth.append({"jobs": done, "lines": top_growth(snapshot, new)})
                snapshot = new
            samples.append(sample)
            print(json.dumps(sample), flush=True)
    holder["sup"].request_stop(False)
    await asyncio.wait_for(daemon, 60)
    return {"samples": samples, "growth": growth}


def summary(result: dict[str, Any], warmup: int) -> dict[str, Any]:
    samples = result["samples"]
    after = [s for s in samples if s["jobs"] >= warmup]
    base = after[0]
    return {
        "warmup_jobs": warmup,
        "rss_after_warmup_mib": base["rss_mib"],
        "rss_end_mib": samples[-1]["rss_mib"],
        "rss_growth_after_warmup_mib": round(max(s["rss_mib"] for s in after) - base["rss_mib"], 2),
        "fds_range": [min(s["fds"] for s in after), max(s["fds"] for s in after)],
        "threads_range": [min(s["threads"] for s in after), max(s["threads"] for s in after)],
        "jobs": samples[-1]["jobs"],
        "seconds": samples[-1]["seconds"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--job-seconds", type=float, default=0.05)
    parser.add_argument("--sample-every", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--no-metrics", action="store_true", help="run without the endpoint")
    parser.add_argument("--trim-every", type=float, default=0.5, help="seconds between trims")
    parser.add_argument("--no-arena-limit", action="store_true", help="skip run's mallopt")
    parser.add_argument("--frames", type=int, default=4, help="traceback depth with --tracemalloc")
    parser.add_argument(
        "--settle", type=float, default=1.5, help="seconds waited once idle, before a sample"
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "soak.json"))
    args = parser.parse_args()
    if not args.no_arena_limit:
        limit_arenas()  # as `gpuci-tui run` does at start
    # The daemon trims every 30 s, i.e. every ~10 jobs of a real host; this harness runs
    # ~150 jobs a second, so it trims on the same scale of jobs, not of seconds.
    memory.TRIM_INTERVAL = args.trim_every
    result = asyncio.run(soak(args))
    result["summary"] = summary(result, args.warmup)
    result["setup"] = {
        "slots": args.slots,
        "job_seconds": args.job_seconds,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "tracemalloc": args.tracemalloc,
        "threads_at_end": threading.active_count(),
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    s = result["summary"]
    print("\n| jobs | RSS after warm-up | RSS growth after warm-up | fds | threads | time |")
    print("|---|---|---|---|---|---|")
    print(
        f"| {s['jobs']} | {s['rss_after_warmup_mib']} MiB | {s['rss_growth_after_warmup_mib']} MiB "
        f"| {s['fds_range'][0]}–{s['fds_range'][1]} | {s['threads_range'][0]}–"
        f"{s['threads_range'][1]} | {s['seconds']:.0f} s |"
    )
    for step in result["growth"][-3:]:
        print(f"\ngrowth up to {step['jobs']} jobs:")
        for line in step["lines"]:
            print("  " + line)


if __name__ == "__main__":
    main()
