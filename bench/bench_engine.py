"""Engine benchmark: `gpuci-tui run` on the real Docker engine against the simulated org.

Measures, in one run:
* replenish latency (old container's ``die`` → replacement's ``start``, from Docker's
  own event timestamps), p50/p95;
* makespan of M short jobs on N slots versus the ideal ceil(M/N) × job length;
* Docker-side cost: Docker events per job;
* Azure DevOps requests per minute while busy and while idle (public API only);
* idle CPU % and RSS of the daemon process.

Usage: python bench/bench_engine.py [--slots N] [--jobs M] [--job-seconds S] [--idle-seconds T]
Writes bench/results/engine.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import psutil

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config, save_config
from gpuci_tui.core.docker.agentspec import LABEL_INSTANCE, LABEL_SLOT, instance_id
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.sim.image import build_emulator_image
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.records import AgentStartup
from gpuci_tui.sim.server import SimServer

ROOT = Path(__file__).resolve().parent.parent


def stop_daemon(daemon: subprocess.Popen[Any], client: Any, config: Config) -> None:
    """SIGTERM the daemon (SIGKILL after 15 s) and remove every container of its agent set."""
    daemon.send_signal(signal.SIGTERM)
    try:
        daemon.wait(15)
    except subprocess.TimeoutExpired:
        daemon.kill()
    for c in client.containers.list(
        all=True, sparse=True, filters={"label": f"{LABEL_INSTANCE}={instance_id(config)}"}
    ):
        with contextlib.suppress(docker.errors.APIError):
            c.remove(force=True)


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(0, math.ceil(pct / 100 * len(ordered)) - 1)
    return ordered[rank]


def machine() -> dict[str, Any]:
    """Where the figures were measured."""
    client = docker.from_env()
    version = client.version()
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "docker": version.get("Version"),
        "docker_api": version.get("ApiVersion"),
    }


class EventRecorder(threading.Thread):
    """Collects die/start times per slot from Docker's event stream."""

    def __init__(self, client: docker.DockerClient, instance: str) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.instance = instance
        self.events: list[tuple[str, int, float]] = []
        self._stream: Any = None

    def run(self) -> None:
        self._stream = self.client.events(
            decode=True,
            filters={"type": "container", "label": f"{LABEL_INSTANCE}={self.instance}"},
        )
        for event in self._stream:
            attrs = event.get("Actor", {}).get("Attributes", {})
            slot = attrs.get(LABEL_SLOT)
            if slot is not None:
                self.events.append((event["Action"], int(slot), event["timeNano"] / 1e9))

    def stop(self) -> None:
        if self._stream is not None:
            self._stream.close()

    def replenish_latencies(self) -> list[float]:
        """For every die, the delay to the next start of the same slot."""
        out: list[float] = []
        pending: dict[int, float] = {}
        for action, slot, at in self.events:
            if action == "die":
                pending[slot] = at
            elif action == "start" and slot in pending:
                out.append(at - pending.pop(slot))
        return out


@dataclass
class World:
    """The simulated organisation (served on 127.0.0.1), a configuration and its files."""

    client: Any
    org: SimOrg
    pool_id: int
    server: SimServer
    work: Path
    config: Config
    config_path: Path
    env: dict[str, str]


def make_world(
    slots: int,
    poll_interval: float,
    prefix: str = "bench",
    *,
    client: Any = None,
    image: str | None = None,
    heartbeat_timeout: float = 10.0,
    startup: AgentStartup | None = None,
    **agents: Any,
) -> World:
    """Organisation with one pool, served; config, PAT file and XDG directories written.

    Args:
        slots: The agent count.
        poll_interval: The supervisor's pool poll.
        prefix: Names the agents, the PAT, the organisation and the work directory.
        client: A Docker client the caller has (else one from the environment).
        image: The agent image (else the emulator image, built).
        heartbeat_timeout: The organisation's (seconds without a heartbeat: offline).
        startup: How long the simulated agents take to start (else the organisation's).
        **agents: More ``[agents]`` settings (``standby``, ``standby_max``, ...).
    """
    if client is None:
        client = docker.from_env()
    if image is None:
        image = build_emulator_image(client)
    pat = f"{prefix}-" + uuid.uuid4().hex * 2
    org = SimOrg(f"{prefix}-org", heartbeat_timeout=heartbeat_timeout, startup=startup)
    org.add_pat(pat)
    pool_id = org.add_pool("gpu")
    server = SimServer(org)
    server.start()
    work = Path(tempfile.mkdtemp(prefix=f"gpuci-{prefix}-"))
    config = Config(
        azure=AzureConfig(url=server.url, pool="gpu"),
        agents=AgentsConfig(
            count=slots,
            image=image,
            name_prefix=f"{prefix}{uuid.uuid4().hex[:4]}",
            network="host",
            gpus="none",
            **agents,
        ),
        supervisor=SupervisorConfig(poll_interval=poll_interval),
    )
    config_path = work / "config.toml"
    save_config(config, config_path)
    (work / "pat").write_text(pat)
    (work / "pat").chmod(0o600)
    env = dict(os.environ, GPUCI_PAT_FILE=str(work / "pat"))
    for var, sub in (
        ("XDG_STATE_HOME", "state"),
        ("XDG_RUNTIME_DIR", "run"),
        ("XDG_DATA_HOME", "data"),
    ):
        (work / sub).mkdir(mode=0o700)
        env[var] = str(work / sub)
    return World(client, org, pool_id, server, work, config, config_path, env)


def launch_daemon(world: World, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """``gpuci-tui run`` for ``world``, logging to ``daemon.log`` in its directory."""
    log = open(world.work / "daemon.log", "wb")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "-m", "gpuci_tui.cli.main", "--config", str(world.config_path), "run"],
        env=world.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    world = make_world(args.slots, 10.0)
    client, org, pool_id, server = world.client, world.org, world.pool_id, world.server
    work, config = world.work, world.config
    recorder = EventRecorder(client, instance_id(config))
    recorder.start()
    daemon = launch_daemon(world)
    try:
        deadline = time.monotonic() + 60
        while sum(1 for a in org.agents(pool_id) if a.online) < args.slots:
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise SystemExit(f"agents did not come online; see {work / 'daemon.log'}")
            time.sleep(0.05)
        # Load: M jobs queued at once.
        busy_since = time.time()
        ids = [org.queue_job(pool_id, duration=args.job_seconds) for _ in range(args.jobs)]
        while any(org.job(i).result is None for i in ids):
            if daemon.poll() is not None:
                raise SystemExit("daemon died")
            time.sleep(0.05)
        makespan = max(org.job(i).finish_time or 0 for i in ids) - busy_since
        busy_minutes = (time.time() - busy_since) / 60
        busy_requests = [e for e in org.request_log(since=busy_since) if not e.private]
        ideal = math.ceil(args.jobs / args.slots) * args.job_seconds
        # Let the last replacements come up, then measure idle cost.
        time.sleep(3)
        proc = psutil.Process(daemon.pid)
        cpu0 = proc.cpu_times()
        idle_since = time.time()
        time.sleep(args.idle_seconds)
        cpu1 = proc.cpu_times()
        idle_cpu = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / args.idle_seconds * 100
        idle_requests = [e for e in org.request_log(since=idle_since) if not e.private]
        rss_mib = proc.memory_info().rss / 2**20
        latencies = recorder.replenish_latencies()
        events_per_job = len(list(recorder.events)) / max(1, args.jobs)
        assigned_twice = [i for i in ids if org.job(i).assign_count != 1]
        results = {
            "machine": machine(),
            "scenario": {
                "slots": args.slots,
                "jobs": args.jobs,
                "job_seconds": args.job_seconds,
                "idle_seconds": args.idle_seconds,
            },
            "replenish_s": {
                "n": len(latencies),
                "p50": round(statistics.median(latencies), 3) if latencies else None,
                "p95": round(percentile(latencies, 95), 3) if latencies else None,
                "max": round(max(latencies), 3) if latencies else None,
            },
            "makespan_s": round(makespan, 2),
            "ideal_makespan_s": round(ideal, 2),
            "makespan_over_ideal": round(makespan / ideal, 2),
            "docker_events_per_job": round(events_per_job, 1),
            "azure_requests_per_min_busy": round(len(busy_requests) / busy_minutes, 1),
            "azure_requests_per_min_idle": round(len(idle_requests) / (args.idle_seconds / 60), 1),
            "daemon_idle_cpu_pct": round(idle_cpu, 2),
            "daemon_rss_mib": round(rss_mib, 1),
            "jobs_not_assigned_exactly_once": len(assigned_twice),
        }
    finally:
        recorder.stop()
        stop_daemon(daemon, client, config)
        server.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--job-seconds", type=float, default=1.0)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "engine.json")
    args = parser.parse_args()
    results = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
