"""The classic design, for comparison: a loop that checks every slot every 60 seconds.

This is the known recipe for fresh-container agents (a small Python manager):
every ``--interval`` seconds, look up each slot's container by name and start a
fresh one for every slot that has none. No Docker events, no backoff, no Azure
DevOps calls. For a fair comparison it uses the same emulator image, the same
env contract (``AZP_URL``, ``AZP_POOL``, ``AZP_AGENT_NAME``, ``AZP_TOKEN_FILE``,
``AZP_WORK``), the same token-file delivery (``put_archive`` before ``start``)
and host networking as gpuci-tui's agents; its containers are auto-removed, as with
the usual ``docker run --rm`` (gpuci-tui removes dead agents itself, after their tails).

Usage (bench/bench_load.py runs it as a subprocess):
    python bench/classic.py --url URL --pool POOL --image IMAGE --slots N \\
        --name-prefix PREFIX --pat-file FILE [--interval 60] [--label KEY=VALUE ...]

On SIGTERM/SIGINT the loop stops (agents are left running) and one JSON line
``{"docker_api_calls": N, "starts": M, "cycles": K}`` is printed to stdout.
"""

from __future__ import annotations

import argparse
import io
import json
import signal
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import docker
import docker.errors

TOKEN_PATH = "/run/azp/token"
SLOT_LABEL = "io.gpuci-tui.slot"  # same key as gpuci-tui, so one event recorder serves both


def token_archive(token: str) -> bytes:
    """A tar with ``run/azp/`` (0700) and ``run/azp/token`` (0600), for ``put_archive("/")``."""
    buf = io.BytesIO()
    data = token.encode()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        folder = tarfile.TarInfo("run/azp")
        folder.type, folder.mode = tarfile.DIRTYPE, 0o700
        tar.addfile(folder)
        info = tarfile.TarInfo("run/azp/token")
        info.size, info.mode = len(data), 0o600
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class ClassicManager:
    """Polls every slot by container name and starts the missing ones."""

    def __init__(
        self,
        client: docker.DockerClient,
        *,
        url: str,
        pool: str,
        image: str,
        slots: int,
        name_prefix: str,
        token: str,
        labels: dict[str, str],
        interval: float = 60.0,
    ) -> None:
        self.client = client
        self.url = url
        self.pool = pool
        self.image = image
        self.slots = slots
        self.name_prefix = name_prefix
        self.labels = labels
        self.interval = interval
        self.archive = token_archive(token)
        self.stopping = threading.Event()
        self.starts = 0
        self.cycles = 0
        self.api_calls = 0
        self._count_api_calls()

    def _count_api_calls(self) -> None:
        """Count every HTTP request to the engine (APIClient is a requests.Session)."""
        api = self.client.api
        original = api.request

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.api_calls += 1
            return original(*args, **kwargs)

        api.request = counted  # type: ignore[method-assign]

    def name(self, slot: int) -> str:
        """Container and agent name of ``slot``."""
        return f"{self.name_prefix}-{slot}"

    def check_once(self) -> None:
        """One pass of the loop: start a container for every slot that has none running."""
        self.cycles += 1
        for slot in range(self.slots):
            name = self.name(slot)
            try:
                container = self.client.api.inspect_container(name)
            except docker.errors.NotFound:
                container = None
            if container is not None:
                if container["State"].get("Running"):
                    continue
                # Exited but not yet auto-removed: the recipe removes it and starts afresh.
                try:
                    self.client.api.remove_container(name, force=True)
                except docker.errors.APIError:
                    continue  # retried at the next pass, 60 s later (no backoff either way)
            try:
                self.start(slot)
            except docker.errors.APIError as exc:
                print(f"classic: slot {slot}: {exc}", file=sys.stderr, flush=True)

    def start(self, slot: int) -> None:
        """Create, copy the token file in, start."""
        api = self.client.api
        name = self.name(slot)
        created = api.create_container(
            self.image,
            name=name,
            environment={
                "AZP_URL": self.url,
                "AZP_POOL": self.pool,
                "AZP_AGENT_NAME": name,
                "AZP_TOKEN_FILE": TOKEN_PATH,
                "AZP_WORK": "_work",
            },
            labels={**self.labels, SLOT_LABEL: str(slot)},
            host_config=api.create_host_config(network_mode="host", auto_remove=True),
        )
        api.put_archive(created["Id"], "/", self.archive)
        api.start(created["Id"])
        self.starts += 1

    def run(self) -> None:
        """Check, sleep ``interval``, repeat until `stop`."""
        while not self.stopping.is_set():
            self.check_once()
            self.stopping.wait(self.interval)

    def stop(self) -> None:
        """End the loop at its next wake-up (at once if it is sleeping)."""
        self.stopping.set()


def main() -> None:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", required=True)
    parser.add_argument("--pool", required=True)
    parser.add_argument("--image", required=True)
    parser.add_argument("--slots", type=int, required=True)
    parser.add_argument("--name-prefix", required=True)
    parser.add_argument("--pat-file", type=Path, required=True)
    parser.add_argument("--interval", type=float, default=60.0)
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    labels = dict(item.split("=", 1) for item in args.label)
    manager = ClassicManager(
        docker.from_env(),
        url=args.url,
        pool=args.pool,
        image=args.image,
        slots=args.slots,
        name_prefix=args.name_prefix,
        token=args.pat_file.read_text().strip(),
        labels=labels,
        interval=args.interval,
    )
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: manager.stop())
    started = time.monotonic()
    manager.run()
    summary = {
        "docker_api_calls": manager.api_calls,
        "starts": manager.starts,
        "cycles": manager.cycles,
        "seconds": round(time.monotonic() - started, 1),
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
