"""Deterministic fakes for the console tests: supervisor handle, runtime, GPUs, setup clients.

Everything here is in-memory and driven by the test: the handle only changes
when the test pushes an update, the GPU sampler replays fixed frames, the
clock is frozen (`tests.ui.scenarios`). That is what makes the Pilot
assertions and the SVG snapshots reproducible.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuci_tui.core.command_types import Command, CommandResult
from gpuci_tui.core.config.loader import Config
from gpuci_tui.core.engine.preview import CommandPreview, preview
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.gpu_readings import GpuFrame, GpuHostInfo
from gpuci_tui.core.host.handle import Update
from gpuci_tui.core.models import SupervisorSnapshot
from gpuci_tui.core.protocols import ContainerEvent, ContainerInfo, ContainerSpec, PatCheck, Pool
from gpuci_tui.services import Services
from gpuci_tui.sim.gpu_synthetic import FixtureSampler
from tests.ui.scenarios import frozen_clock, gpu_frame, sample_config

# --------------------------------------------------------------------------- handle


class FakeHandle:
    """A `SupervisorHandle` whose state only changes when the test says so."""

    def __init__(
        self,
        snapshot: SupervisorSnapshot,
        *,
        mode: str = "in-process",
        respond: Callable[[Command], CommandResult] | None = None,
    ) -> None:
        """Create a handle reporting ``snapshot``.

        Args:
            snapshot: The state `snapshot()` returns until an update replaces it.
            mode: ``in-process`` or ``daemon``.
            respond: Builds the result of each command (default: ok, "done: <command>").
        """
        self.current = snapshot
        self.sent: list[Command] = []
        self.closed = False
        self.fail_with: Exception | None = None
        self.snapshot_calls = 0
        self._mode = mode
        self._respond = respond or (lambda command: CommandResult(True, f"done: {command}"))
        self._queue: asyncio.Queue[Update | None] = asyncio.Queue()

    @property
    def mode(self) -> str:
        """``in-process`` or ``daemon``."""
        return self._mode

    async def snapshot(self) -> SupervisorSnapshot:
        """The current state."""
        self.snapshot_calls += 1
        return self.current

    async def send(self, command: Command) -> CommandResult:
        """Record ``command``; raise `fail_with` when set."""
        self.sent.append(command)
        if self.fail_with is not None:
            raise self.fail_with
        return self._respond(command)

    async def preview(self, command: Command) -> CommandPreview:
        """The core's preview of ``command`` on the current snapshot (as a daemon answers)."""
        return preview(self.current, command)

    def updates(self) -> AsyncIterator[Update]:
        """What the test pushes, in order, until `end_stream` or `close`."""
        return self._stream()

    async def _stream(self) -> AsyncIterator[Update]:
        while True:
            item = await self._queue.get()
            if item is None:
                return
            yield item

    def push(self, update: Update) -> None:
        """Deliver a snapshot or an event to the console."""
        if isinstance(update, SupervisorSnapshot):
            self.current = update
        self._queue.put_nowait(update)

    def end_stream(self) -> None:
        """End the current `updates()` iteration (as a restarted daemon would)."""
        self._queue.put_nowait(None)

    async def close(self) -> None:
        """Disconnect."""
        self.closed = True
        self._queue.put_nowait(None)


# --------------------------------------------------------------------------- runtime


class FakeRuntime:
    """A `ContainerRuntime` with scripted logs (only what the console calls is real)."""

    def __init__(
        self, logs: Mapping[str, Sequence[str]] | None = None, images: Sequence[str] = ()
    ) -> None:
        """Create it with per-container output and the locally present images."""
        self._lock = threading.Lock()
        self._logs: dict[str, list[str]] = {cid: list(lines) for cid, lines in (logs or {}).items()}
        self.images = set(images)
        self.tail_calls: list[tuple[str, int]] = []
        self.image_checks: list[str] = []

    def write(self, container_id: str, *lines: str) -> None:
        """The container prints ``lines``."""
        with self._lock:
            self._logs.setdefault(container_id, []).extend(lines)

    def vanish(self, container_id: str) -> None:
        """The container is removed (auto_remove after exit)."""
        with self._lock:
            self._logs.pop(container_id, None)

    def logs_tail(self, container_id: str, lines: int = 20) -> list[str]:
        """The last ``lines`` lines ([] when the container is gone)."""
        with self._lock:
            self.tail_calls.append((container_id, lines))
            return list(self._logs.get(container_id, [])[-lines:])

    def image_present(self, image: str) -> bool:
        """Whether ``image`` was declared present."""
        self.image_checks.append(image)
        return image in self.images

    def ping(self) -> None:
        """Always reachable."""

    def list_containers(self, labels: Mapping[str, str]) -> list[ContainerInfo]:
        """No containers (the console never lists them)."""
        return []

    def start(self, spec: ContainerSpec, token: str) -> ContainerInfo:
        """Not used by the console."""
        raise NotImplementedError("the console never starts containers")

    def stop(self, container_id: str, timeout: float = 30.0) -> None:
        """Not used by the console."""
        raise NotImplementedError("the console never stops containers")

    def remove(self, container_id: str) -> None:
        """Not used by the console."""
        raise NotImplementedError("the console never removes containers")

    def events(self, labels: Mapping[str, str], stop: threading.Event) -> Iterator[ContainerEvent]:
        """Not used by the console."""
        return iter(())


class FakeSampler(FixtureSampler):
    """The project's `FixtureSampler` (replays frames, the last repeats) with a default
    frame and an optional fixed `host_info` (e.g. an old driver for the wizard)."""

    def __init__(
        self, frames: Sequence[GpuFrame] | None = None, host: GpuHostInfo | None = None
    ) -> None:
        """Create it with ``frames`` (default: one `gpu_frame`)."""
        super().__init__(list(frames) if frames else [gpu_frame()])
        self._host = host

    def host_info(self) -> GpuHostInfo:
        """``host`` when given, else the next frame's host facts."""
        return self._host if self._host is not None else super().host_info()


# --------------------------------------------------------------------------- setup (wizard)


class FakeTokenStore:
    """In-memory token store; `broken` makes `set_token` fail like an unusable keyring."""

    def __init__(self, broken: str | None = None) -> None:
        """Create it; ``broken`` is the error message `set_token` raises."""
        self.tokens: dict[str, str] = {}
        self.broken = broken

    def get_token(self, org_url: str) -> str:
        """The stored PAT."""
        try:
            return self.tokens[org_url]
        except KeyError:
            raise GpuciError(f"No PAT stored for {org_url}.") from None

    def set_token(self, org_url: str, pat: str) -> None:
        """Store the PAT (or fail when broken)."""
        if self.broken is not None:
            raise GpuciError(self.broken)
        self.tokens[org_url] = pat

    def source_of_token(self, org_url: str) -> str:
        """``keyring`` when stored, else ``none``."""
        return "keyring" if org_url in self.tokens else "none"


@dataclass
class FakeAzure:
    """Answers the wizard's checks from a table: PAT → PatCheck, plus a pool list."""

    checks: dict[str, PatCheck] = field(default_factory=dict)
    pools: list[Pool] = field(
        default_factory=lambda: [Pool(12, "gpu-a100", size=6), Pool(3, "Default", size=1)]
    )
    calls: list[tuple[str, str, str | None]] = field(default_factory=list)
    gate: threading.Event | None = None
    """When set, checks block until the test sets the event (to see "checking…")."""

    def factory(self, org_url: str, pat: str) -> FakeAzureClient:
        """The `Services.azure_factory`."""
        return FakeAzureClient(self, org_url, pat)


@dataclass
class FakeAzureClient:
    """One client (URL + PAT) of `FakeAzure`."""

    owner: FakeAzure
    org_url: str
    pat: str

    def validate_pat(self, pool_name: str | None) -> PatCheck:
        """The scripted result for this PAT; unknown PATs are rejected."""
        self.owner.calls.append((self.org_url, self.pat, pool_name))
        if self.owner.gate is not None:
            self.owner.gate.wait(5)
        check = self.owner.checks.get(self.pat)
        if check is None:
            return PatCheck(False, "bad_pat", "Azure DevOps rejected the PAT (HTTP 401).")
        if pool_name is not None and check.ok:
            found = [p for p in self.owner.pools if p.name == pool_name]
            if not found:
                return PatCheck(False, "pool_not_found", f"No agent pool named '{pool_name}'.")
            return replace(check, pool=found[0])
        return check

    def list_pools(self) -> list[Pool]:
        """The scripted pools."""
        return list(self.owner.pools)


GOOD_PAT = "good-pat-0123456789abcdefghijklmnopqrstuvwxyz0123"


# --------------------------------------------------------------------------- services


def make_services(
    *,
    handle: FakeHandle | None = None,
    config: Config | None | bool = True,
    runtime: FakeRuntime | None = None,
    sampler: FakeSampler | None = None,
    readonly: bool = False,
    demo: bool = False,
    config_path: Path = Path("/nonexistent/gpuci-tui/config.toml"),
    **extra: Any,
) -> Services:
    """Services wired to fakes; ``config=True`` means `sample_config()`."""
    return Services(
        config=sample_config() if config is True else (config or None),
        config_path=config_path,
        handle=handle,
        gpu=sampler or FakeSampler(),
        runtime=runtime if runtime is not None else FakeRuntime(),
        readonly=readonly,
        demo=demo,
        clock=extra.pop("clock", frozen_clock),
        # Long intervals: tests drive polls explicitly instead of racing timers.
        gpu_interval=extra.pop("gpu_interval", 3600.0),
        log_interval=extra.pop("log_interval", 3600.0),
        **extra,
    )
