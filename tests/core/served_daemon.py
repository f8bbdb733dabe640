"""A daemon (`serve`, with its control socket) on the simulated organisation, in this loop.

The CLI is run against it in a thread (it blocks on the socket), as an operator's
shell would: ``gpuci-tui --config PATH ...`` with the file the daemon started from.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from gpuci_tui.cli.main import main
from gpuci_tui.core.config.loader import daemon_instance, load_config
from gpuci_tui.core.host.control.server import ControlServer
from gpuci_tui.core.host.daemon import DaemonPaths, serve
from gpuci_tui.core.host.handle import Supervised
from gpuci_tui.core.host.supervision.group_supervisor import GroupSupervisor
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.runtime import SimulatedRuntime
from tests.core.supervisor_env import PAT, StaticTokens, wait_until


class Daemon:
    """The daemon served from ``path``: its supervisor, its task, the CLI against it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.supervisor: GroupSupervisor | None = None
        self.task: asyncio.Task[int] | None = None

    @property
    def sup(self) -> GroupSupervisor:
        assert self.supervisor is not None
        return self.supervisor

    async def cli(self, *argv: str) -> int:
        # The CLI blocks on the socket: off the loop that serves it.
        return await asyncio.to_thread(main, ["--config", str(self.path), *argv])


@contextlib.asynccontextmanager
async def served(
    path: Path, text: str, ready_when: Callable[[GroupSupervisor], bool]
) -> AsyncIterator[Daemon]:
    """Write ``text`` to ``path``, serve it until ``ready_when`` holds, stop it afterwards."""
    org = SimOrg(heartbeat_timeout=3.0)
    org.add_pat(PAT)
    org.add_pool("gpu")
    await asyncio.to_thread(path.write_text, text, encoding="utf-8")
    config = load_config(path)
    running = Daemon(path)

    def ready(sup: Supervised, server: ControlServer) -> None:
        assert isinstance(sup, GroupSupervisor)
        running.supervisor = sup

    task = running.task = asyncio.create_task(
        serve(
            config,
            api=SimPoolApi(org, PAT),
            runtime=SimulatedRuntime(org, destroy_delay=0.05),
            tokens=StaticTokens(),
            paths=DaemonPaths.for_instance(daemon_instance(config)),
            ready=ready,
        )
    )
    try:
        await wait_until(lambda: running.supervisor is not None or task.done(), what="serving")
        await wait_until(lambda: ready_when(running.sup), timeout=20, what="ready")
        yield running
    finally:
        if running.supervisor is not None:
            running.supervisor.request_stop()
        await asyncio.wait_for(task, 15)
