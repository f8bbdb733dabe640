"""GPU admission benchmark: from a GPU freeing to the next job starting on it (standby on).

The real `gpuci-tui run` on the real Docker engine (busybox agent emulator, agents with the
real agent's start-up times), the gcc-built fake libnvidia-ml.so.1 as the host's NVML, and
one slot on GPU 0 with hot standby. Each round:

1. a foreign process appears on GPU 0 in the fake NVML state (pid 4242, 61 GB);
2. the daemon holds the slot: every agent of it disabled on the server (still registered);
3. a job is queued (it waits: no enabled agent), then, after a random 0-1 s so that the
   moment is spread over the sampling period, the process leaves the NVML state;
4. measured: GPU freed -> agent enabled on the server, and GPU freed -> job assigned
   (what a pipeline sees), p50/p95/max over the rounds.

The bound of the design is one sampling period ([gpu] sample_interval) plus one PATCH;
the job then starts at the agent's next poll of the server. Rounds are spaced by more than
the hold-down (10 s), so each one measures a GPU that frees up once; ``--flapping N`` adds
N rounds that take the GPU again right after its release, where the hold-down (not the
sampling) sets the delay by design.

The daemon runs through tests/drills/gpu_daemon.py: its containers get no GPU device
request (no NVIDIA runtime on a benchmark host without GPUs); nothing else differs.

Usage: python bench/bench_gpu_admission.py [--rounds 20] [--sample-interval 1.0 0.5]
Writes bench/results/gpu_admission.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import docker
from bench_engine import machine, percentile, stop_daemon
from bench_observe import build_fake_nvml

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config, save_config
from gpuci_tui.core.config.observe import GpuConfig
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.sim.image import build_emulator_image
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.records import REALISTIC_STARTUP
from gpuci_tui.sim.server import SimServer

ROOT = Path(__file__).resolve().parent.parent
GPU = "driver 580.159.04\ncuda 13000\ngpu NVIDIA_H100 GPU-00000000 0 0 0 81559 35 70000 700000 0\n"
FOREIGN = "proc 0 4242 62500 60 20\n"


def write_state(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)  # atomic: the library never reads half a file


def wait(pred: Any, timeout: float, what: str, daemon: subprocess.Popen[Any]) -> float:
    """Poll every 10 ms; return the time.time() at which ``pred`` first held."""
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline or daemon.poll() is not None:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.01)
    return time.time()


HOLD_DOWN = AgentsConfig.gpu_hold_down


def one_run(
    client: Any, image: str, nvml: Path, *, rounds: int, interval: float, flapping: bool
) -> dict[str, Any]:
    """All rounds with one daemon sampling every ``interval`` seconds."""
    pat = "bench-" + uuid.uuid4().hex * 2
    org = SimOrg("bench-org", heartbeat_timeout=15.0, startup=REALISTIC_STARTUP)
    org.add_pat(pat)
    pool_id = org.add_pool("gpu")
    server = SimServer(org)
    server.start()
    work = Path(tempfile.mkdtemp(prefix="gpuci-admission-"))
    prefix = f"ga{uuid.uuid4().hex[:4]}"
    config = Config(
        azure=AzureConfig(url=server.url, pool="gpu"),
        agents=AgentsConfig(
            count=1, image=image, name_prefix=prefix, network="host", gpus="per-agent"
        ),
        supervisor=SupervisorConfig(poll_interval=10.0),
        gpu=GpuConfig(sample_interval=interval),
    )
    config_path = work / "config.toml"
    save_config(config, config_path)
    (work / "pat").write_text(pat)
    (work / "pat").chmod(0o600)
    state = work / "nvml.state"
    write_state(state, GPU)
    env = dict(
        os.environ,
        GPUCI_PAT_FILE=str(work / "pat"),
        LD_LIBRARY_PATH=str(nvml.parent),
        FAKE_NVML_STATE=str(state),
        PYTHONPATH=str(ROOT),
    )
    for var, sub in (("XDG_STATE_HOME", "state"), ("XDG_RUNTIME_DIR", "run"),
                     ("XDG_DATA_HOME", "data")):  # fmt: skip
        (work / sub).mkdir(mode=0o700)
        env[var] = str(work / sub)
    log = open(work / "daemon.log", "wb")  # noqa: SIM115
    daemon = subprocess.Popen(
        [sys.executable, "-m", "tests.drills.gpu_daemon", "--config", str(config_path), "run"],
        env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT,
    )  # fmt: skip

    def agents() -> list[Any]:
        return [a for a in org.agents(pool_id) if a.name.startswith(prefix)]

    def serving() -> bool:
        online = [a for a in agents() if a.online]
        return len(online) == 2 and sum(a.enabled for a in online) == 1

    def held() -> bool:
        online = [a for a in agents() if a.online]
        return len(online) == 2 and not any(a.enabled for a in online)

    to_enable: list[float] = []
    to_assign: list[float] = []
    rng = random.Random(14)
    try:
        wait(serving, 120, f"the agents; see {work / 'daemon.log'}", daemon)
        for _ in range(rounds):
            write_state(state, GPU + FOREIGN)
            wait(held, 30, "the slot held", daemon)
            job = org.queue_job(pool_id, duration=0.5)
            time.sleep(rng.uniform(0.0, 1.0))
            assert org.job(job).agent_name is None, "a job started on a taken GPU"
            freed = time.time()
            write_state(state, GPU)
            enabled = wait(lambda: any(a.enabled for a in agents()), 30, "the enable", daemon)
            wait(lambda j=job: org.job(j).assign_time is not None, 30, "the job", daemon)
            to_enable.append(enabled - freed)
            to_assign.append((org.job(job).assign_time or 0.0) - freed)
            wait(lambda j=job: org.job(j).result is not None, 30, "the job to end", daemon)
            wait(serving, 60, "the standby back", daemon)
            if not flapping:
                # The next hold must not count as flapping: wait the hold-down out.
                time.sleep(max(0.0, freed + to_enable[-1] + HOLD_DOWN + 1.0 - time.time()))
    finally:
        stop_daemon(daemon, client, config)
        server.stop()

    def stats(values: list[float]) -> dict[str, float]:
        return {
            "n": len(values),
            "p50": round(statistics.median(values), 2),
            "p95": round(percentile(values, 95), 2),
            "max": round(max(values), 2),
        }

    return {
        "sample_interval_s": interval,
        "flapping": flapping,
        "rounds": rounds,
        "freed_to_enabled_s": stats(to_enable),
        "freed_to_job_assigned_s": stats(to_assign),
    }


def table(runs: list[dict[str, Any]]) -> str:
    """The Markdown table of BENCHMARKS.md."""
    head = (
        "| sample interval | rounds | GPU freed → agent enabled p50 / p95 / max "
        "| GPU freed → next job assigned p50 / p95 / max |\n| --- | --- | --- | --- |\n"
    )
    rows = []
    for r in runs:
        e, a = r["freed_to_enabled_s"], r["freed_to_job_assigned_s"]
        case = " (flapping)" if r["flapping"] else ""
        rows.append(
            f"| {r['sample_interval_s']:g} s{case} | {r['rounds']} "
            f"| {e['p50']} / {e['p95']} / {e['max']} s | {a['p50']} / {a['p95']} / {a['max']} s |"
        )
    return head + "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--sample-interval", type=float, nargs="+", default=[1.0, 0.5])
    parser.add_argument("--flapping", type=int, default=5, help="rounds of a flapping GPU (1 s)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "bench" / "results" / "gpu_admission.json"
    )
    args = parser.parse_args()
    client = docker.from_env()
    image = build_emulator_image(client)
    nvml = build_fake_nvml(Path(tempfile.mkdtemp(prefix="gpuci-nvml-")))
    began = time.time()
    runs = []
    cases = [(interval, args.rounds, False) for interval in args.sample_interval]
    if args.flapping:
        cases.append((1.0, args.flapping, True))
    for interval, rounds, flapping in cases:
        result = one_run(client, image, nvml, rounds=rounds, interval=interval, flapping=flapping)
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
