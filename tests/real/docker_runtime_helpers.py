"""Helpers of the DockerRuntime tests against the real engine: specs, secrets, event collection."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from gpuci_tui.core.docker.runtime import DockerRuntime
from gpuci_tui.core.protocols import (
    ContainerEvent,
    ContainerSpec,
)
from tests.waiting import wait_until  # noqa: F401 - its tests import it from here

DOCKER_SOCKET = "/var/run/docker.sock"


def secret() -> str:
    """A PAT-shaped string unique to the test (52 characters, like an Azure DevOps PAT)."""
    return ("gpucitestpat" + os.urandom(20).hex())[:52]


def make_spec(run_label: str, suffix: str, image: str, **overrides: Any) -> ContainerSpec:
    values: dict[str, Any] = {
        "name": f"gpuci-rt-{run_label}-{suffix}",
        "image": image,
        "labels": {"gpuci.test": run_label, "gpuci.case": suffix},
        "environment": {"AZP_TOKEN_FILE": "/run/azp/token", "GPUCI_SLOT": "1"},
        "network": "host",
        "command": ("sleep", "30"),
    }
    values.update(overrides)
    return ContainerSpec(**values)


def ours(docker_client: Any, run_label: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = docker_client.api.containers(
        all=True, filters={"label": f"gpuci.test={run_label}"}
    )
    return items


class EventCollector:
    """Runs `DockerRuntime.events` on a thread and keeps what arrives."""

    def __init__(self, rt: DockerRuntime, labels: dict[str, str], since: float | None) -> None:
        self.stop = threading.Event()
        self.events: list[ContainerEvent] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, args=(rt, labels, since), daemon=True)
        self._thread.start()

    def _run(self, rt: DockerRuntime, labels: dict[str, str], since: float | None) -> None:
        for event in rt.events(labels, self.stop, since=since):
            with self._lock:
                self.events.append(event)

    def seen(self, pred: Callable[[ContainerEvent], bool]) -> list[ContainerEvent]:
        with self._lock:
            return [e for e in self.events if pred(e)]

    def wait_for(
        self, pred: Callable[[ContainerEvent], bool], timeout: float = 10.0
    ) -> ContainerEvent:
        assert wait_until(lambda: bool(self.seen(pred)), timeout), (
            f"event not seen; got {[(e.action, e.name) for e in self.events]}"
        )
        return self.seen(pred)[0]

    def close(self) -> float:
        """Stop and return how long the iteration took to end."""
        started = time.monotonic()
        self.stop.set()
        self._thread.join(5)
        assert not self._thread.is_alive(), "events() did not end after stop was set"
        return time.monotonic() - started
