"""Observability benchmark: daemon CPU and RSS with 8 slots and 1 Hz GPU sampling, metrics off vs on.

The real `gpuci-tui run` on the real Docker engine (busybox emulator agents, hot standby
off so 8 containers, not 16, share the machine), a simulated organisation, and the fake
libnvidia-ml.so.1 of tests/fixtures/fake_nvml.c with 8 GPUs (found by pynvml through
LD_LIBRARY_PATH), sampled every second ([gpu] sample_interval = 1.0, the default). Each
mode (``[metrics] listen`` unset, and set with a scraper) runs on a fresh organisation
and daemon, alternating, ``--repeat`` times:

* idle window: all 8 agents idle for ``--idle-seconds``; daemon CPU (% of one core)
  and RSS at its end;
* busy window: 2 jobs per slot of ``--job-seconds`` each; CPU while busy, RSS after;
* with metrics: a scrape every ``--scrape-interval`` s throughout (Prometheus' default
  is 15 s; 5 s overstates the cost on purpose), its latency and size.

Usage: python bench/bench_observe.py [--repeat 2] [--idle-seconds 45] [--job-seconds 10]
Writes bench/results/observe.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
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
import psutil
import requests
from bench_engine import machine, percentile, stop_daemon

from gpuci_tui.core.config.loader import (
    AgentsConfig,
    AzureConfig,
    Config,
    MetricsConfig,
    save_config,
)
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.sim.image import build_emulator_image
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.records import AgentStartup
from gpuci_tui.sim.server import SimServer

ROOT = Path(__file__).resolve().parent.parent
SLOTS = 8
NVML_STATE = "driver 550.54.15\ncuda 12040\n" + "".join(
    f"gpu NVIDIA_A100 GPU-{i:08d} {20 + i * 5} 10 {1024 * (i + 1)} 40960 45 120000 300000 0\n"
    f"energy {i} {1_000_000 * (i + 1)}\n"
    for i in range(SLOTS)
)


def build_fake_nvml(out_dir: Path) -> Path:
    """Compile tests/fixtures/fake_nvml.c as tests/core/conftest.py does."""
    gcc = shutil.which("gcc") or sys.exit("gcc is needed to build the fake NVML library")
    out = out_dir / "libnvidia-ml.so.1"
    src = ROOT / "tests" / "fixtures" / "fake_nvml.c"
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O2", "-Wl,-soname,libnvidia-ml.so.1", "-o", str(out),
         str(src), "-lpthread"],
        check=True,
    )  # fmt: skip
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Scraper(threading.Thread):
    """Scrapes /metrics every ``interval`` seconds, as Prometheus would."""

    def __init__(self, url: str, interval: float) -> None:
        super().__init__(daemon=True)
        self.url, self.interval = url, interval
        self.latencies_ms: list[float] = []
        self.sizes: list[int] = []
        self.errors = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            started = time.perf_counter()
            try:
                body = requests.get(self.url, timeout=5).content
            except requests.RequestException:
                self.errors += 1
                continue
            self.latencies_ms.append((time.perf_counter() - started) * 1000)
            self.sizes.append(len(body))


def cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def one_run(
    client: Any, image: str, nvml: Path, args: argparse.Namespace, metrics: bool
) -> dict[str, Any]:
    """One mode with a fresh organisation and daemon."""
    pat = "bench-" + uuid.uuid4().hex * 2
    org = SimOrg("bench-org", heartbeat_timeout=15.0, startup=AgentStartup(1.0, 0.5))
    org.add_pat(pat)
    pool_id = org.add_pool("gpu")
    server = SimServer(org)
    server.start()
    work = Path(tempfile.mkdtemp(prefix="gpuci-observe-"))
    port = free_port()
    config = Config(
        azure=AzureConfig(url=server.url, pool="gpu"),
        agents=AgentsConfig(
            count=SLOTS, image=image, name_prefix=f"ob{uuid.uuid4().hex[:4]}", network="host",
            gpus="none", standby=False,
        ),
        supervisor=SupervisorConfig(poll_interval=10.0),
        metrics=MetricsConfig(f"127.0.0.1:{port}" if metrics else ""),
    )  # fmt: skip
    config_path = work / "config.toml"
    save_config(config, config_path)
    (work / "pat").write_text(pat)
    (work / "pat").chmod(0o600)
    (work / "nvml.state").write_text(NVML_STATE)
    env = dict(
        os.environ,
        GPUCI_PAT_FILE=str(work / "pat"),
        LD_LIBRARY_PATH=str(nvml.parent),
        FAKE_NVML_STATE=str(work / "nvml.state"),
    )
    for var, sub in (("XDG_STATE_HOME", "state"), ("XDG_RUNTIME_DIR", "run"),
                     ("XDG_DATA_HOME", "data")):  # fmt: skip
        (work / sub).mkdir(mode=0o700)
        env[var] = str(work / sub)
    log = open(work / "daemon.log", "wb")  # noqa: SIM115
    daemon = subprocess.Popen(
        [sys.executable, "-m", "gpuci_tui.cli.main", "--config", str(config_path), "run"],
        env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/metrics"
    scraper = Scraper(url, args.scrape_interval) if metrics else None
    try:
        started = time.monotonic()
        while len([a for a in org.agents(pool_id) if a.online and a.enabled]) < SLOTS:
            if time.monotonic() - started > 180 or daemon.poll() is not None:
                raise SystemExit(f"agents did not come up; see {work / 'daemon.log'}")
            time.sleep(0.1)
        time.sleep(3.0)  # let the start-up burst settle
        proc = psutil.Process(daemon.pid)
        if scraper is not None:
            scraper.start()
        cpu0, t0 = cpu_seconds(proc), time.monotonic()
        time.sleep(args.idle_seconds)
        cpu1, t1 = cpu_seconds(proc), time.monotonic()
        rss_idle = proc.memory_info().rss / 2**20
        ids = [org.queue_job(pool_id, duration=args.job_seconds) for _ in range(2 * SLOTS)]
        while any(org.job(i).result is None for i in ids):
            if daemon.poll() is not None:
                raise SystemExit("daemon died")
            time.sleep(0.1)
        cpu2, t2 = cpu_seconds(proc), time.monotonic()
        rss_busy = proc.memory_info().rss / 2**20
        gpus_seen = None
        result_extra: dict[str, Any] = {}
        if metrics:
            # The history rows (and so the job counter) follow the daemon's next poll.
            done = f'gpuci_jobs_total{{group="default",result="succeeded"}} {len(ids)}.0'
            deadline = time.monotonic() + 60
            while done not in (text := requests.get(url, timeout=5).text):
                if time.monotonic() > deadline:
                    raise SystemExit(f"the job counter never reached {len(ids)}:\n{text}")
                time.sleep(0.5)
            gpus_seen = text.count("gpuci_gpu_utilization_ratio{")
            replenished = text.split('gpuci_replenish_seconds_count{group="default"} ')[1]
            result_extra = {"replenish_count": float(replenished.split()[0])}
    finally:
        if scraper is not None:
            scraper.stop.set()
        stop_daemon(daemon, client, config)
        server.stop()
    result: dict[str, Any] = {
        "metrics": metrics,
        "idle_seconds": round(t1 - t0, 1),
        "busy_seconds": round(t2 - t1, 1),
        "jobs": len(ids),
        "jobs_not_succeeded": sum(1 for i in ids if org.job(i).result != "succeeded"),
        "daemon_cpu_pct_idle": round((cpu1 - cpu0) / (t1 - t0) * 100, 2),
        "daemon_cpu_pct_busy": round((cpu2 - cpu1) / (t2 - t1) * 100, 2),
        "daemon_rss_mib_idle": round(rss_idle, 1),
        "daemon_rss_mib_busy": round(rss_busy, 1),
    }
    if scraper is not None:
        lat = scraper.latencies_ms
        result.update(
            scrapes=len(lat),
            scrape_errors=scraper.errors,
            scrape_ms_p50=round(statistics.median(lat), 1) if lat else None,
            scrape_ms_p95=round(percentile(lat, 95), 1) if lat else None,
            scrape_bytes=max(scraper.sizes, default=None),
            gpus_in_metrics=gpus_seen,
            **result_extra,
        )
    return result


def table(runs: list[dict[str, Any]]) -> str:
    """The Markdown table of BENCHMARKS.md."""
    head = (
        "| metrics | CPU idle | CPU busy | RSS idle | RSS busy | scrape p50 / p95 | scrape size |\n"
        "| --- | --- | --- | --- | --- | --- | --- |\n"
    )
    rows = []
    for r in runs:
        scrape = (
            f"{r['scrape_ms_p50']} / {r['scrape_ms_p95']} ms ({r['scrapes']} scrapes)"
            if r["metrics"]
            else "–"
        )
        size = f"{r['scrape_bytes'] / 1024:.1f} KiB" if r["metrics"] else "–"
        rows.append(
            f"| {'on' if r['metrics'] else 'off'} | {r['daemon_cpu_pct_idle']} % "
            f"| {r['daemon_cpu_pct_busy']} % | {r['daemon_rss_mib_idle']} MiB "
            f"| {r['daemon_rss_mib_busy']} MiB | {scrape} | {size} |"
        )
    return head + "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--idle-seconds", type=float, default=45.0)
    parser.add_argument("--job-seconds", type=float, default=10.0)
    parser.add_argument("--scrape-interval", type=float, default=5.0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "observe.json")
    args = parser.parse_args()
    client = docker.from_env()
    image = build_emulator_image(client)
    nvml = build_fake_nvml(Path(tempfile.mkdtemp(prefix="gpuci-fake-nvml-")))
    runs = []
    began = time.time()
    for _ in range(args.repeat):
        for metrics in (False, True):
            result = one_run(client, image, nvml, args, metrics)
            print(json.dumps(result), flush=True)
            runs.append(result)
    out = {
        "benchmark": "observe",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(began)),
        "machine": machine(),
        "slots": SLOTS,
        "gpu_sample_interval_s": 1.0,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "runs": runs,
    }
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(table(runs))


if __name__ == "__main__":
    main()
