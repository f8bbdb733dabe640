"""The daemon's side of the control socket (the protocol is described in `control`).

The socket file is created with mode 0600 and, on top of that, a peer whose
uid differs from the daemon's is refused (SO_PEERCRED). Even the owner's
processes are not trusted to behave: at most ``max_clients`` are served at once
(more are told so and closed), a request must be complete within
``request_timeout`` s of its first byte (the first request within that long of
connecting), lines are limited to `control.MAX_LINE` bytes and JSON nesting to
`serving.MAX_DEPTH`, and every malformed request gets an error reply rather
than a dropped connection and a logged traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from pathlib import Path
from typing import Any

from gpuci_tui.core.config.file import config_to_toml
from gpuci_tui.core.config.model import Config
from gpuci_tui.core.host.control.client import MAX_LINE, OPS, ControlError, peer_uid, socket_alive
from gpuci_tui.core.host.control.history_serving import history_answer
from gpuci_tui.core.host.control.log_serving import MIN_INTERVAL, LogsTail, logs_answer
from gpuci_tui.core.host.control.serving import (
    IDLE_TIMEOUT,
    MAX_CLIENTS,
    MAX_DEPTH,
    REQUEST_TIMEOUT,
    BoundedListener,
    LineReader,
    LineTooLongError,
    too_deep,
)
from gpuci_tui.core.host.handle import Supervised
from gpuci_tui.core.models import PROTOCOL_VERSION, SupervisorSnapshot
from gpuci_tui.core.secrets.redaction import redact
from gpuci_tui.core.wire import command_from_dict, to_dict

log = logging.getLogger("gpuci_tui.control")


class ControlServer:
    """Serves one supervisor on a Unix socket."""

    def __init__(
        self,
        supervisor: Supervised,
        path: Path,
        *,
        max_clients: int = MAX_CLIENTS,
        request_timeout: float = REQUEST_TIMEOUT,
        idle_timeout: float = IDLE_TIMEOUT,
        logs_tail: LogsTail | None = None,
        history_path: Path | None = None,
    ) -> None:
        """Prepare to serve ``supervisor`` at ``path`` (see `start`).

        A connection silent for ``idle_timeout`` s between requests is closed
        (a console's channel reopens on its next request). ``logs_tail``: the
        container runtime's, for ``logs`` requests (None: they are refused).
        ``history_path``: the supervisor's job history, for ``history`` requests
        (None: it has none, and says so).
        """
        self.logs_tail = logs_tail
        self.history_path = history_path
        self.supervisor = supervisor
        self.path = path
        self.max_clients = max_clients
        self.request_timeout = request_timeout
        self.idle_timeout = idle_timeout
        self._listener: BoundedListener | None = None
        self.refused = 0
        self._paced_at: dict[tuple[str, int], float] = {}
        """When each connection (by its writer) last got an answer of a paced op."""

    @property
    def rejected(self) -> int:
        """Connections closed at once because `max_clients` were being served."""
        return self._listener.rejected if self._listener is not None else 0

    @property
    def clients(self) -> int:
        """Connections being served now."""
        return self._listener.clients if self._listener is not None else 0

    async def start(self) -> None:
        """Bind the socket (0600 from the first instant) and accept connections."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.path.exists() or self.path.is_symlink():
            if socket_alive(self.path):
                raise ControlError(f"another gpuci-tui daemon is serving {self.path}")
            self.path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # no window in which the socket is group/world-accessible
        try:
            sock.bind(str(self.path))
        except OSError:
            sock.close()
            raise
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)
        sock.listen(128)
        error = f"the daemon is busy: {self.max_clients} clients already connected; try again"
        busy = _line({"ok": False, "error": error})
        self._listener = BoundedListener(
            sock,
            self._serve,
            what=f"control socket {self.path}",
            max_clients=self.max_clients,
            limit=MAX_LINE,
            busy=lambda conn: conn.send(busy),
        )
        self._listener.start()

    async def close(self) -> None:
        """Stop accepting, drop clients and remove the socket file."""
        if self._listener is not None:
            self._listener.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            sock = writer.get_extra_info("socket")
            uid = peer_uid(sock) if sock is not None else None
            if uid is not None and uid != os.getuid():
                self.refused += 1
                log.warning("refused a control connection from uid %s", uid)
                error = "permission denied: not the daemon's user"
                await asyncio.wait_for(_send(writer, {"ok": False, "error": error}), 5.0)
                return
            await self._requests(LineReader(reader, MAX_LINE), writer)
        except (ConnectionError, TimeoutError):
            pass  # gone, silent or not reading: nothing more to say to it
        finally:
            for op in ("logs", "history"):
                self._paced_at.pop((op, id(writer)), None)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)

    async def _requests(self, lines: LineReader, writer: asyncio.StreamWriter) -> None:
        idle = self.request_timeout  # the first request comes at once, or not at all
        while True:
            try:
                line = await lines.next(idle, self.request_timeout)
            except LineTooLongError:
                error = f"bad request: longer than {MAX_LINE} bytes"
                await asyncio.wait_for(_send(writer, {"ok": False, "error": error}), 5.0)
                return
            if line is None:
                return
            try:
                reply = await self._answer(line, writer)
            except (asyncio.CancelledError, ConnectionError, TimeoutError):
                raise
            except Exception as exc:  # noqa: BLE001 - every request gets an answer
                log.warning("control request failed: %s: %s", type(exc).__name__, exc)
                reply = {"ok": False, "error": f"the daemon failed on this request: {exc}"}
            if reply is None:
                return  # the stream of a subscription ended
            await asyncio.wait_for(_send(writer, reply), self.idle_timeout)
            idle = self.idle_timeout

    async def _answer(self, line: bytes, writer: asyncio.StreamWriter) -> dict[str, Any] | None:
        deep = f"bad request: nested deeper than {MAX_DEPTH} levels"
        try:
            request = json.loads(line)
        except RecursionError:
            return {"ok": False, "error": deep}
        except ValueError as exc:
            return {"ok": False, "error": f"bad request: {exc}"}
        if not isinstance(request, dict):
            return {"ok": False, "error": "bad request: a request must be a JSON object"}
        if too_deep(request):
            return {"ok": False, "error": deep}
        op = request.get("op")
        sup = self.supervisor
        if op == "hello":
            return {
                "ok": True,
                "protocol": PROTOCOL_VERSION,
                "pid": os.getpid(),
                "instance": sup.instance,
            }
        if op == "status":
            return {"ok": True, "snapshot": to_dict(sup.snapshot())}
        if op == "config":
            return config_answer(sup)
        if op in ("command", "preview"):
            try:
                command = command_from_dict(request.get("command") or {})
            except (ValueError, TypeError, AttributeError) as exc:
                return {"ok": False, "error": f"bad command: {exc}"}
            if op == "preview":
                return {"ok": True, "preview": to_dict(sup.preview(command))}
            result = await sup.execute(command)
            return {"ok": result.ok, "result": to_dict(result)}
        if op == "subscribe":
            await self._stream(writer)
            return None
        if op == "logs":
            await self._pace(op, writer)
            return await logs_answer(request, sup.snapshot(), self.logs_tail)
        if op == "history":
            await self._pace(op, writer)
            return await history_answer(request, self.history_path)
        expected = f"{', '.join(OPS[:-1])} or {OPS[-1]}"
        return {"ok": False, "error": f"unknown op {op!r}; expected {expected}"}

    async def _pace(self, op: str, writer: asyncio.StreamWriter) -> None:
        """One answer of ``op`` per `MIN_INTERVAL` on a connection, however fast it asks."""
        key = (op, id(writer))
        loop = asyncio.get_running_loop()  # the timer is the loop: its time, not the OS's
        wait = self._paced_at.get(key, -MIN_INTERVAL) + MIN_INTERVAL - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        self._paced_at[key] = loop.time()

    async def _stream(self, writer: asyncio.StreamWriter) -> None:
        sup = self.supervisor
        queue = sup.subscribe()
        try:
            # A subscriber that stops reading is dropped, not waited on forever.
            for event in list(sup.events):
                message = {"type": "event", "data": to_dict(event)}
                await asyncio.wait_for(_send(writer, message), self.idle_timeout)
            message = {"type": "snapshot", "data": to_dict(sup.snapshot())}
            await asyncio.wait_for(_send(writer, message), self.idle_timeout)
            while True:
                item = await queue.get()
                kind = "snapshot" if isinstance(item, SupervisorSnapshot) else "event"
                message = {"type": kind, "data": to_dict(item)}
                await asyncio.wait_for(_send(writer, message), self.idle_timeout)
        finally:
            sup.unsubscribe(queue)


def config_answer(sup: Supervised) -> dict[str, Any]:
    """The configuration the supervisor runs on: its file, when it was read, its TOML.

    So a command or a console whose file no longer parses still says what the
    daemon runs on (and the console can open on it).
    """
    config = getattr(sup, "config", None)
    if not isinstance(config, Config):
        return {"ok": False, "error": "this supervisor was not started from a configuration"}
    loaded_at = getattr(sup, "config_loaded_at", None)
    return {
        "ok": True,
        "path": str(config.path) if config.path is not None else "",
        "loaded_at": loaded_at if isinstance(loaded_at, int | float) else None,
        "toml": config_to_toml(config),
    }


def _line(message: dict[str, Any]) -> bytes:
    # Everything that leaves the daemon passes the one redactor (status, events, the bridge).
    return redact(json.dumps(message, separators=(",", ":"))).encode() + b"\n"


async def _send(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    writer.write(_line(message))
    await writer.drain()
