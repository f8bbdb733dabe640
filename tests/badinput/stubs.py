"""A supervisor stand-in for serving the control protocol without Docker or Azure DevOps."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpuci_tui.core.command_types import Command, CommandResult
from gpuci_tui.core.host.control.server import ControlServer
from gpuci_tui.core.models import SupervisorEvent, SupervisorSnapshot


class StubSupervisor:
    """Answers like a supervisor with no slots; records the commands it carried out."""

    def __init__(self) -> None:
        self.executed: list[Command] = []

    instance = "stub"
    gpu_watch = None
    events: list[SupervisorEvent] = []

    def snapshot(self) -> SupervisorSnapshot:
        return SupervisorSnapshot(
            taken_at=0.0, org_url="https://dev.azure.com/x", pool="p", instance="stub",
            desired_count=0,
        )  # fmt: skip

    async def execute(self, command: Command) -> CommandResult:
        self.executed.append(command)
        return CommandResult(True, "done")

    def preview(self, command: Command) -> Any:
        raise RuntimeError("preview exploded")

    def subscribe(self) -> asyncio.Queue[Any]:
        return asyncio.Queue()

    def unsubscribe(self, queue: asyncio.Queue[Any]) -> None:
        pass


@contextlib.contextmanager
def served(path: Path) -> Iterator[StubSupervisor]:
    """A real `ControlServer` for a `StubSupervisor` at ``path``, on a loop in a thread."""
    stub = StubSupervisor()
    server = ControlServer(stub, path)  # type: ignore[arg-type]
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(10)
    try:
        yield stub
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
