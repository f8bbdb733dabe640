"""Load benchmark: 32 slots, 500 short jobs; gpuci-tui versus the classic 60-second loop.

Both designs run, one after the other in this one invocation, on the same machine and the
same scenario: a fresh simulated organisation (SimServer, real HTTP on 127.0.0.1), N
slots of real emulator containers on the real Docker engine (network_mode host), and M
jobs of S seconds queued at once after all N agents are online.

* gpuci-tui: the real ``gpuci-tui run`` daemon (isolated XDG dirs, ``GPUCI_PAT_FILE``).
* classic: ``bench/classic.py``, a loop that every ``--classic-interval`` (60) seconds
  looks up each slot's container by name and starts a fresh one for each missing slot.

Figures per design: makespan versus the ideal ceil(M/N) × S; replenish latency p50/p95
(old container's ``die`` → the same slot's next ``start``, Docker's own event timestamps);
manager CPU (user+sys seconds during the load, % of one core) and RSS (sampled every
0.5 s: peak and final); Azure DevOps requests per minute on the public API, split by
route (one agents-list per cycle, never a per-agent call); Docker API calls per job
(the daemon logs its runtime's request count at shutdown; the classic manager prints
its own) and Docker events per job.

Usage: python bench/bench_load.py [--slots 32] [--jobs 500] [--job-seconds 2]
       [--classic-interval 60] [--designs gpuci,classic]
Writes bench/results/load.json and prints it. Exits 1 if a budget check fails
(a job lost or run twice, or a per-agent Azure call during the load).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import docker
import docker.errors
import psutil
from bench_engine import EventRecorder, machine, percentile

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config, save_config
from gpuci_tui.core.docker.agentspec import LABEL_INSTANCE, LABEL_SLOT, instance_id
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.sim.image import build_emulator_image
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.server import SimServer

ROOT = Path(__file__).resolve().parent.parent
POLL_INTERVAL = 10.0  # gpuci-tui's default agents-list cycle
AGENTS_ROUTE = "/_apis/distributedtask/pools/{poolId}/agents"
AGENT_ROUTE = "/_apis/distributedtask/pools/{poolId}/agents/{agentId}"


class Recorder(EventRecorder):
    """`EventRecorder` that survives the engine dropping the event stream.

    Other suites on a shared machine may restart dockerd (the fault drills do);
    the stream then ends. Reconnect with ``since`` = the last event seen so the
    gap is refilled from the engine's buffer where it still holds it, and count
    the reconnects so a gap in the figures is visible in the results.
    """

    def __init__(self, client: Any, instance: str) -> None:
        super().__init__(client, instance)
        self.reconnects = 0
        self._stopped = threading.Event()
        self._seen: set[tuple[str, str, int]] = set()

    def run(self) -> None:
        since: float | None = None
        while not self._stopped.is_set():
            try:
                self._stream = self.client.events(
                    decode=True,
                    since=since,
                    filters={"type": "container", "label": f"{LABEL_INSTANCE}={self.instance}"},
                )
                for event in self._stream:
                    key = (event["Action"], event.get("id", ""), event["timeNano"])
                    if key in self._seen:  # replayed by `since` after a reconnect
                        continue
                    self._seen.add(key)
                    since = event["timeNano"] / 1e9
                    slot = event.get("Actor", {}).get("Attributes", {}).get(LABEL_SLOT)
                    if slot is not None:
                        self.events.append((event["Action"], int(slot), event["timeNano"] / 1e9))
            except Exception:  # noqa: BLE001 - the engine went away; reconnect below
                pass
            if not self._stopped.is_set():
                self.reconnects += 1
                self._stopped.wait(0.5)

    def stop(self) -> None:
        self._stopped.set()
        super().stop()


class Sampler(threading.Thread):
    """Samples a process's RSS every 0.5 s (peak and last value)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.peak = 0
        self.last = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            with contextlib.suppress(psutil.Error):
                self.last = self.proc.memory_info().rss
                self.peak = max(self.peak, self.last)
            self.done.wait(0.5)


def cpu_seconds(proc: psutil.Process) -> float:
    """User + system CPU seconds of ``proc`` so far."""
    times = proc.cpu_times()
    return float(times.user + times.system)


def wait_until(what: str, predicate: Any, timeout: float, proc: subprocess.Popen[bytes]) -> None:
    """Poll ``predicate`` every 0.1 s; fail if the manager dies or the deadline passes."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise SystemExit(f"the manager exited ({proc.returncode}) while waiting for {what}")
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def start_gpuci(
    args: argparse.Namespace, work: Path, url: str, image: str, pat_file: Path
) -> tuple[subprocess.Popen[bytes], str]:
    """Start the real ``gpuci-tui run``; return the process and its instance id."""
    config = Config(
        azure=AzureConfig(url=url, pool="gpu"),
        agents=AgentsConfig(
            count=args.slots,
            image=image,
            name_prefix=f"load{uuid.uuid4().hex[:4]}",
            network="host",
            gpus="none",
        ),
        supervisor=SupervisorConfig(poll_interval=POLL_INTERVAL),
    )
    save_config(config, work / "config.toml")
    env = dict(os.environ, GPUCI_PAT_FILE=str(pat_file))
    for var, sub in (
        ("XDG_STATE_HOME", "state"),
        ("XDG_RUNTIME_DIR", "run"),
        ("XDG_DATA_HOME", "data"),
    ):
        (work / sub).mkdir(mode=0o700)
        env[var] = str(work / sub)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuci_tui.cli.main", "--config", str(work / "config.toml"), "run"],
        env=env,
        stdout=open(work / "manager.log", "wb"),  # noqa: SIM115 - closed with the process
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    return proc, instance_id(config)


def start_classic(
    args: argparse.Namespace, work: Path, url: str, image: str, pat_file: Path
) -> tuple[subprocess.Popen[bytes], str]:
    """Start bench/classic.py; return the process and the instance label it puts on containers."""
    instance = f"classic-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bench" / "classic.py"),
            "--url",
            url,
            "--pool",
            "gpu",
            "--image",
            image,
            "--slots",
            str(args.slots),
            "--name-prefix",
            f"classic{uuid.uuid4().hex[:4]}",
            "--pat-file",
            str(pat_file),
            "--interval",
            str(args.classic_interval),
            "--label",
            f"{LABEL_INSTANCE}={instance}",
        ],  # fmt: skip
        stdout=open(work / "manager.out", "wb"),  # noqa: SIM115 - closed with the process
        stderr=open(work / "manager.log", "wb"),  # noqa: SIM115
        stdin=subprocess.DEVNULL,
    )
    return proc, instance


def docker_api_calls(design: str, work: Path) -> int | None:
    """The manager's own count of Docker API requests, reported at shutdown."""
    if design == "gpuci":
        found = re.findall(rb"docker api calls: (\d+)", (work / "manager.log").read_bytes())
        return int(found[-1]) if found else None
    lines = (work / "manager.out").read_text().strip().splitlines()
    return int(json.loads(lines[-1])["docker_api_calls"]) if lines else None


def run_design(design: str, args: argparse.Namespace, client: Any, image: str) -> dict[str, Any]:
    """One design on a fresh organisation; returns its figures."""
    pat = "load-" + uuid.uuid4().hex * 2
    # A generous heartbeat timeout: 32 agents share 2 cores, and a starved agent
    # must not turn into an abandoned job that neither design caused.
    org = SimOrg(f"load-{design}", heartbeat_timeout=30.0)
    org.add_pat(pat)
    pool_id = org.add_pool("gpu")
    server = SimServer(org)
    server.start()
    work = Path(tempfile.mkdtemp(prefix=f"gpuci-load-{design}-"))
    pat_file = work / "pat"
    pat_file.write_text(pat)
    pat_file.chmod(0o600)
    starter = start_gpuci if design == "gpuci" else start_classic
    proc, instance = starter(args, work, server.url, image, pat_file)
    recorder = Recorder(client, instance)
    recorder.start()
    sampler = Sampler(proc.pid)
    sampler.start()
    ps = psutil.Process(proc.pid)
    print(f"[{design}] started pid {proc.pid}, logs in {work}", file=sys.stderr, flush=True)
    try:
        wait_until(
            f"{args.slots} agents online",
            lambda: sum(1 for a in org.agents(pool_id) if a.online) >= args.slots,
            180,
            proc,
        )
        cpu0 = cpu_seconds(ps)
        t0 = time.time()
        ids = [org.queue_job(pool_id, duration=args.job_seconds) for _ in range(args.jobs)]
        print(f"[{design}] {args.jobs} jobs queued", file=sys.stderr, flush=True)
        # Classic: ~ceil(M/N) waves of one interval each; allow twice that.
        budget = 600 + 2 * math.ceil(args.jobs / args.slots) * (
            args.classic_interval if design == "classic" else 10
        )
        wait_until(
            "every job to finish",
            lambda: all(org.job(i).result is not None for i in ids),
            budget,
            proc,
        )
        t1 = time.time()
        cpu1 = cpu_seconds(ps)
        jobs = [org.job(i) for i in ids]
        makespan = max(j.finish_time or 0 for j in jobs) - t0
        ideal = math.ceil(args.jobs / args.slots) * args.job_seconds
        load_minutes = (t1 - t0) / 60
        public = [e for e in org.request_log(since=t0) if not e.private and e.at <= t1]
        by_route: dict[str, int] = {}
        for entry in public:
            key = f"{entry.method} {entry.route}"
            by_route[key] = by_route.get(key, 0) + 1
        list_calls = by_route.get(f"GET {AGENTS_ROUTE}", 0)
        per_agent_calls = sum(n for k, n in by_route.items() if k.endswith(AGENT_ROUTE))
        rss_final = sampler.last
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        sampler.done.set()
        recorder.stop()
        for c in client.containers.list(
            all=True, sparse=True, filters={"label": f"{LABEL_INSTANCE}={instance}"}
        ):
            with contextlib.suppress(docker.errors.APIError):
                c.remove(force=True)
        server.stop()
    # Only the load window: a die before the jobs were queued or after the last one
    # finished is start-up or cleanup, not replenishing under load.
    window = [e for e in recorder.events if t0 <= e[2] <= t1 + 120]
    latencies = []
    pending: dict[int, float] = {}
    for action, slot, at in sorted(window, key=lambda e: e[2]):
        if action == "die" and at <= t1:
            pending[slot] = at
        elif action == "start" and slot in pending:
            latencies.append(at - pending.pop(slot))
    events_in_load = sum(1 for e in recorder.events if t0 <= e[2] <= t1)
    starts_in_load = sum(1 for e in recorder.events if e[0] == "start" and t0 <= e[2] <= t1)
    calls = docker_api_calls(design, work)
    cycles = (t1 - t0) / (POLL_INTERVAL if design == "gpuci" else args.classic_interval)
    cpu = cpu1 - cpu0
    return {
        "makespan_s": round(makespan, 1),
        "ideal_makespan_s": round(ideal, 1),
        "makespan_over_ideal": round(makespan / ideal, 2),
        "replenish_s": {
            "n": len(latencies),
            "p50": round(statistics.median(latencies), 3) if latencies else None,
            "p95": round(percentile(latencies, 95), 3) if latencies else None,
            "max": round(max(latencies), 3) if latencies else None,
        },
        "manager_cpu_s_during_load": round(cpu, 2),
        "manager_cpu_pct_of_one_core": round(cpu / (t1 - t0) * 100, 2),
        "manager_rss_mib_peak": round(sampler.peak / 2**20, 1),
        "manager_rss_mib_final": round(rss_final / 2**20, 1),
        "azure_requests_during_load": len(public),
        "azure_requests_per_min": round(len(public) / load_minutes, 1),
        "azure_requests_per_5_min": round(len(public) / load_minutes * 5, 1),
        "azure_requests_by_route": dict(sorted(by_route.items())),
        "azure_agents_list_calls": list_calls,
        "azure_cycles_in_load": round(cycles, 1),
        "azure_per_agent_calls": per_agent_calls,
        "docker_api_calls_total": calls,
        "docker_api_calls_per_job": round(calls / args.jobs, 1) if calls is not None else None,
        "docker_events_per_job_during_load": round(events_in_load / args.jobs, 2),
        "container_starts_during_load": starts_in_load,
        "event_stream_reconnects": recorder.reconnects,
        "jobs_succeeded": sum(1 for j in jobs if j.result == "succeeded"),
        "jobs_not_assigned_exactly_once": sum(1 for j in jobs if j.assign_count != 1),
        "logs": str(work),
    }


def main() -> None:
    """Run the designs, write the results, check the budgets."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--slots", type=int, default=32)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--job-seconds", type=float, default=2.0)
    parser.add_argument("--classic-interval", type=float, default=60.0)
    parser.add_argument("--designs", default="gpuci,classic")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "load.json")
    args = parser.parse_args()
    client = docker.from_env()
    image = build_emulator_image(client)
    started = time.time()
    results: dict[str, Any] = {
        "machine": machine(),
        "command": "python " + " ".join(["bench/bench_load.py", *sys.argv[1:]]),
        "scenario": {
            "slots": args.slots,
            "jobs": args.jobs,
            "job_seconds": args.job_seconds,
            "classic_interval_s": args.classic_interval,
            "gpuci_poll_interval_s": POLL_INTERVAL,
        },
        "designs": {},
    }
    for design in args.designs.split(","):
        results["designs"][design] = run_design(design, args, client, image)
        print(json.dumps({design: results["designs"][design]}, indent=2), file=sys.stderr)
    results["wall_s"] = round(time.time() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    failures = []
    for design, figures in results["designs"].items():
        if figures["jobs_not_assigned_exactly_once"] or figures["jobs_succeeded"] != args.jobs:
            failures.append(f"{design}: a job was lost, failed or assigned more than once")
        if figures["azure_per_agent_calls"]:
            failures.append(f"{design}: per-agent Azure DevOps calls during the load")
        if figures["azure_agents_list_calls"] > figures["azure_cycles_in_load"] + 2:
            failures.append(f"{design}: more than one agents-list call per cycle")
    for failure in failures:
        print("FAIL:", failure, file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
