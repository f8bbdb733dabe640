"""Pull progress overhead: one image pulled from a loopback registry with and without progress.

A (no progress): `EngineRegistry.pull` reads Docker's stream and drops each line.
B (progress):    `ImagePuller.pull` with a progress callback: every line folded
                 into a `PullTracker` (layers, bytes, rate, ETA), its result kept
                 for the snapshot and handed to the callback (as `image pull` does).

Runs alternate A and B (so that a drift of the machine hits both) and remove the
image between runs, so each one downloads and extracts every layer. Reports the
wall time and this process's CPU time per pull (the progress work is ours; the
download and the extraction are Docker's), and the stream lines per pull.

Needs Docker, Debian's docker-registry and the busybox test fixture image
(`gpuci-fixture/busybox:1`, made by the test suite), nothing from outside.

Usage: PYTHONPATH=. python bench/bench_pull_progress.py [--runs N] [--layer-mb M] [--layers K]
Writes bench/results/pull_progress.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import docker

from gpuci_tui.core.docker.pull_progress import PullProgress
from gpuci_tui.core.docker.runtime import DockerRuntime
from gpuci_tui.core.host.images.puller import ImagePuller
from tests.conftest import FIXTURE_IMAGE
from tests.real.registry import (
    loopback_registry,
    publish,
    remove_local,
    remove_repo,
    unique_repo,
)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "pull_progress.json"
MB = 1_000_000


class Counted:
    """The engine's registry, counting the stream's lines and the layers downloaded."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry
        self.lines = 0
        self.downloaded = 0

    def local_digests(self, image: str) -> tuple[str, ...] | None:
        return self.registry.local_digests(image)  # type: ignore[no-any-return]

    def remote_digest(self, image: str) -> str:
        return str(self.registry.remote_digest(image))

    def pull(self, image: str, on_line: Callable[[Mapping[str, Any]], None] | None = None) -> None:
        def count(line: Mapping[str, Any]) -> None:
            self.lines += 1
            self.downloaded += line.get("status") == "Pull complete"
            if on_line is not None:
                on_line(line)

        self.registry.pull(image, count)


def one_pull(runtime: DockerRuntime, ref: str, progress: bool) -> dict[str, float]:
    counted = Counted(runtime.registry)

    def seen(_p: PullProgress) -> None:
        pass

    wall, cpu = time.perf_counter(), time.process_time()
    if progress:
        ImagePuller(counted).pull(ref, on_progress=seen)
    else:
        counted.pull(ref)
    return {
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
        "lines": float(counted.lines),
        "layers_downloaded": float(counted.downloaded),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="pulls of each kind (default 5)")
    parser.add_argument("--layer-mb", type=int, default=100, help="MB of random data per layer")
    parser.add_argument("--layers", type=int, default=3, help="layers of random data")
    args = parser.parse_args()

    client = docker.from_env(timeout=120)
    runtime = DockerRuntime(client)
    with (
        tempfile.TemporaryDirectory(prefix="gpuci-bench-pull-") as tmp,
        loopback_registry(Path(tmp) / "registry") as registry,
    ):
        base = FIXTURE_IMAGE
        client.images.get(base)  # made by the test suite: fail early when it is not here
        # K layers: K images stacked, the last one pushed (each adds a random layer).
        ref = f"{registry.host}/{unique_repo('gpuci-bench')}:v1"
        before = {image.id for image in client.images.list(all=True)}
        for _ in range(args.layers):
            publish(client, base, ref, args.layer_mb * MB, keep=True)
            base = ref
        # The built chain's untagged parents would keep their layers here: all of it goes.
        remove_local(client, ref)
        for image in client.images.list(all=True):
            if image.id not in before:
                remove_local(client, image.id)
        results: dict[str, list[dict[str, float]]] = {"without": [], "with": []}
        for _ in range(args.runs):
            for kind in ("without", "with"):
                remove_local(client, ref)
                results[kind].append(one_pull(runtime, ref, progress=kind == "with"))
        remove_repo(client, ref)
    summary = {
        kind: {
            key: statistics.median(run[key] for run in runs)
            for key in ("wall_s", "cpu_s", "lines", "layers_downloaded")
        }
        for kind, runs in results.items()
    }
    report = {
        "machine": platform.node(),
        "cpus": os.cpu_count(),
        "runs": args.runs,
        "layers": args.layers,
        "layer_mb": args.layer_mb,
        "median": summary,
        "all": results,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"| pull ({args.layers} × {args.layer_mb} MB, median of {args.runs}) | wall s | "
        "CPU s (this process) | stream lines | layers downloaded |"
    )
    print("|---|---:|---:|---:|---:|")
    for kind in ("without", "with"):
        m = summary[kind]
        print(
            f"| {kind} progress | {m['wall_s']:.2f} | {m['cpu_s']:.3f} | {m['lines']:.0f} "
            f"| {m['layers_downloaded']:.0f} |"
        )


if __name__ == "__main__":
    main()
