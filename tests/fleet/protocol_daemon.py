"""A stand-in daemon that speaks the control protocol on a Unix socket, in the test's event loop.

It answers hello/status/preview/command from a fixed snapshot and streams
that snapshot to subscribers until told otherwise, so `SshHandle` can be
tested without Docker; the tests with real daemons are in test_fleet_ssh.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

from gpuci_tui.core.command_types import CommandResult
from gpuci_tui.core.engine.preview import preview
from gpuci_tui.core.models import PROTOCOL_VERSION, SupervisorSnapshot
from gpuci_tui.core.wire import command_from_dict, to_dict


class ProtocolDaemon:
    """Serves ``snapshot`` at ``path``; records every request."""

    def __init__(self, path: Path, snapshot: SupervisorSnapshot) -> None:
        self.path = path
        self.snapshot = snapshot
        self.requests: list[dict[str, Any]] = []
        self.hang_up_after_answer = False
        """Close each connection after its first answer (a daemon that restarted)."""
        self._server: asyncio.AbstractServer | None = None
        self._subscribers: list[asyncio.StreamWriter] = []
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.path))

    async def stop(self) -> None:
        """The daemon dies: every connection is closed, the socket file removed."""
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.close()
        self.path.unlink(missing_ok=True)

    @property
    def commands(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r.get("op") == "command"]

    async def publish(self, snapshot: SupervisorSnapshot) -> None:
        self.snapshot = snapshot
        for writer in self._subscribers:
            await _send(writer, {"type": "snapshot", "data": to_dict(snapshot)})

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        with contextlib.suppress(ConnectionError):
            while line := await reader.readline():
                request = json.loads(line)
                self.requests.append(request)
                op = request.get("op")
                if op == "subscribe":
                    self._subscribers.append(writer)
                    await _send(writer, {"type": "snapshot", "data": to_dict(self.snapshot)})
                    continue
                await _send(writer, self._answer(op, request))
                if self.hang_up_after_answer and op != "hello":
                    break
        writer.close()

    def _answer(self, op: str | None, request: dict[str, Any]) -> dict[str, Any]:
        if op == "hello":
            return {"ok": True, "protocol": PROTOCOL_VERSION, "pid": 4242, "instance": "x"}
        if op == "status":
            return {"ok": True, "snapshot": to_dict(self.snapshot)}
        command = command_from_dict(request.get("command") or {})
        if op == "preview":
            return {"ok": True, "preview": to_dict(preview(self.snapshot, command))}
        result = CommandResult(True, f"{type(command).__name__.lower()}: done", (0, 1))
        return {"ok": True, "result": to_dict(result)}


async def _send(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    writer.write(json.dumps(message).encode() + b"\n")
    await writer.drain()
