"""History benchmark: what one finished job costs the daemon, and what the CLI's queries cost.

Measures, on a fresh SQLite file (WAL, synchronous=NORMAL, as the daemon opens it):
* write cost per job: `JobHistory.add` of one realistic record (own commit each),
  p50/p95/p99/max over N inserts; the retention run every 1000 inserts is included;
* the retention run on a full history (nothing to delete, and 1000 rows to delete);
* query time with 100 000 rows for the CLI's typical queries (last 50, by pipeline,
  failed since 2d) through `read_history` (read-only open + schema check + query, as
  ``gpuci-tui history`` does), p50/p95 over repeated runs, with SQLite's query plan;
* the whole ``gpuci-tui history`` command (Python start-up included), p50 of 5 runs.

Usage: python bench/bench_history.py [--inserts N] [--rows R] [--repeat K]
Writes bench/results/history.json and prints it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from gpuci_tui.core.store import schema as history_schema
from gpuci_tui.core.store.history import JobHistory, JobQuery, JobRecord, query_sql, read_history

ROOT = Path(__file__).resolve().parent.parent
PIPELINES = [f"train-{i:02d}" for i in range(20)]


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


def summary(values: list[float], digits: int = 1) -> dict[str, float]:
    """n, mean and percentiles of ``values``."""
    return {
        "n": len(values),
        "mean": round(sum(values) / len(values), digits),
        "p50": round(percentile(values, 50), digits),
        "p95": round(percentile(values, 95), digits),
        "p99": round(percentile(values, 99), digits),
        "max": round(max(values), digits),
    }


def machine(directory: Path) -> dict[str, Any]:
    """Where the figures were measured."""
    fs = subprocess.run(
        ["stat", "-f", "-c", "%T", str(directory)], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "kernel": platform.release(),
        "filesystem": fs or "unknown",
    }


def record(i: int, now: float, rng: random.Random) -> JobRecord:
    """A realistic finished job, ending within the last 60 days (none expire at 90)."""
    ended = now - rng.uniform(0, 60 * 86400)
    duration = rng.uniform(30, 3 * 3600)
    failed = rng.random() < 0.1
    return JobRecord(
        instance="0123456789ab",
        slot=i % 8,
        agent=f"gpuhost-{i % 8}",
        request_id=100_000 + i,
        pipeline=rng.choice(PIPELINES),
        run=f"20260928.{i}",
        started_at=ended - duration - 20,
        ended_at=ended,
        exit_code=0,
        oom=failed and rng.random() < 0.3,
        reason="job finished",
        result="failed" if failed else "succeeded",
        queue_wait_s=rng.uniform(0, 120),
        duration_s=duration,
        gpus=(i % 8,),
        gpu_samples=int(duration),
        peak_gpu_memory_mib=rng.uniform(500, 80_000),
        mean_util_pct=rng.uniform(0, 100),
        peak_util_pct=100.0,
        energy_j=rng.uniform(1e3, 3e6),
        energy_note="",
    )


def timed_us(fn: Any, *args: Any) -> float:
    start = time.perf_counter_ns()
    fn(*args)
    return (time.perf_counter_ns() - start) / 1000


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(9)
    now = time.time()
    with tempfile.TemporaryDirectory(prefix="gpuci-bench-history-") as tmp:
        # Where `gpuci-tui history` looks with XDG_STATE_HOME=tmp.
        path = Path(tmp) / "gpuci-tui" / "history.sqlite3"
        h = JobHistory(path)
        # Write cost on a growing file: the first `inserts` rows, one commit each.
        writes = [timed_us(h.add, record(i, now, rng)) for i in range(args.inserts)]
        for i in range(args.inserts, args.rows):
            h.add(record(i, now, rng))
        # Retention on the full file with nothing to delete (the usual case).
        prune_noop_ms = timed_us(h.prune) / 1000
        h.close()
        rows = len(read_history(path, JobQuery(limit=None)) or [])
        queries = {
            "last_50": JobQuery(limit=50),
            "by_pipeline_50": JobQuery(pipeline="train-07", limit=50),
            "failed_since_2d_50": JobQuery(failed_only=True, since=now - 2 * 86400, limit=50),
        }
        query_ms: dict[str, Any] = {}
        for name, query in queries.items():
            times, found = [], 0
            for _ in range(args.repeat):
                start = time.perf_counter_ns()
                found = len(read_history(path, query) or [])
                times.append((time.perf_counter_ns() - start) / 1e6)
            query_ms[name] = {
                **summary(times, 2),
                "rows_returned": found,
                "plan": plan(path, query),
            }
        cli_ms = []
        for argv in (["history"], ["history", "--failed", "--since", "2d"]) * 3:
            start = time.perf_counter_ns()
            subprocess.run(
                [sys.executable, "-m", "gpuci_tui.cli.main", *argv],
                env=dict(os.environ, XDG_STATE_HOME=tmp),
                capture_output=True,
                check=True,
            )
            cli_ms.append((time.perf_counter_ns() - start) / 1e6)
        size = sum(p.stat().st_size for p in path.parent.glob("history.sqlite3*"))
        # Open with a limit 1000 rows lower: the retention at open deletes 1000 rows.
        open_delete_ms = timed_us(lambda: JobHistory(path, max_rows=rows - 1000).close()) / 1000
        return {
            "machine": machine(Path(tmp)),
            "scenario": {"inserts_timed": args.inserts, "rows": rows, "repeat": args.repeat},
            "write_us_per_job": summary(writes),
            "prune_ms": {
                "nothing_to_delete": round(prune_noop_ms, 2),
                "open_and_delete_1000": round(open_delete_ms, 2),
            },
            "query_ms": query_ms,
            "cli_history_ms_p50": round(percentile(cli_ms, 50), 1),
            "file_mib": round(size / 2**20, 1),
        }


def plan(path: Path, query: JobQuery) -> str:
    """SQLite's plan for the statement `read_history` runs (does it use an index?)."""
    sql, params = query_sql(query)
    db = history_schema.open_reader(path)
    try:
        return "; ".join(str(row[-1]) for row in db.execute("EXPLAIN QUERY PLAN " + sql, params))
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inserts", type=int, default=10_000, help="timed inserts")
    parser.add_argument("--rows", type=int, default=100_000, help="rows for the query timings")
    parser.add_argument("--repeat", type=int, default=50, help="runs of each query")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "history.json")
    args = parser.parse_args()
    results = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
