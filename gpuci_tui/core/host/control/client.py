"""The local control socket: a daemon's supervisor, reachable by the CLI and the console.

Wire format: one JSON object per line (UTF-8). Requests carry ``op``:

* ``{"op": "hello"}`` → ``{"ok": true, "protocol": 1, "pid": …, "instance": …}``
* ``{"op": "status"}`` → ``{"ok": true, "snapshot": {…SupervisorSnapshot…}}``
* ``{"op": "config"}`` → ``{"ok": true, "path": …, "loaded_at": …, "toml": …}``: the
  configuration the daemon runs on, whatever its file says now (`LoadedConfig`)
* ``{"op": "command", "command": {"type": "drain", "slots": [1]}}`` →
  ``{"ok": …, "result": {…CommandResult…}}``
* ``{"op": "preview", "command": {…}}`` → ``{"ok": true, "preview": {…CommandPreview…}}``
  (what the command would do, slot by slot; nothing changes)
* ``{"op": "subscribe"}`` → a stream of ``{"type": "event"|"snapshot", "data": {…}}``
  (recent events first, then the current snapshot, then changes as they happen)
* ``{"op": "logs", "container": "<id>", "tail": 200}`` → ``{"ok": true, "lines": […]}``:
  the last lines of one of the daemon's own containers, redacted and bounded
  (`log_serving`); a console follows a remote agent's output by asking again
* ``{"op": "history", "query": {"failed_only": true, "limit": 500, …}}`` →
  ``{"ok": true, "rows": [{…JobRecord…}], "recorded": true, "truncated": false}``:
  the daemon's finished jobs, newest first, read-only, redacted and bounded
  (`history_serving`); a fleet console's history view of a remote host

Anything malformed (not JSON, too long, too deeply nested, an unknown op or
command) gets ``{"ok": false, "error": "…"}``. The server is
`control_server.ControlServer`; this module holds the protocol and its clients:
every request object is built by `message` and every answer read by the
``*_reply`` functions, whether the blocking `ControlClient` (the CLI),
`SocketHandle` (the console, on top of it) or the fleet's ssh handle sends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import struct
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from gpuci_tui.core.command_types import Command, CommandResult
from gpuci_tui.core.engine.preview import CommandPreview
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.host.handle import Update
from gpuci_tui.core.models import SupervisorEvent, SupervisorSnapshot
from gpuci_tui.core.wire import from_dict, snapshot_from_dict, to_dict

log = logging.getLogger("gpuci_tui.control")

MAX_LINE = 1 << 20

#: The requests a daemon answers (the bridge forwards only these).
OPS = ("hello", "status", "config", "command", "preview", "subscribe", "logs", "history")

Op = Literal["hello", "status", "config", "command", "preview", "subscribe"]


class ControlError(GpuciError):
    """The daemon could not be reached or refused the request."""


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (Linux), else None."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def socket_alive(path: Path) -> bool:
    """Whether a daemon answers on the Unix socket ``path`` (a connect within a second)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def message(op: Op, command: Command | None = None) -> dict[str, Any]:
    """The request object of ``op`` (``command`` for the ``command`` and ``preview`` ops)."""
    if command is None:
        return {"op": op}
    return {"op": op, "command": to_dict(command)}


def line_of(request: dict[str, Any]) -> bytes:
    """One request as a compact JSON line (the bridge recognises a subscription by its start)."""
    return json.dumps(request, separators=(",", ":")).encode() + b"\n"


def snapshot_reply(reply: dict[str, Any]) -> SupervisorSnapshot:
    """The snapshot in a ``status`` answer.

    Raises:
        ControlError: the daemon refused, or the answer is malformed.
    """
    if "snapshot" not in reply:
        raise ControlError(str(reply.get("error", "no snapshot in the answer")))
    return _parsed(snapshot_from_dict, reply["snapshot"])


def result_reply(reply: dict[str, Any]) -> CommandResult:
    """The result in a ``command`` answer (a refusal is a failed result)."""
    if "result" not in reply:
        return CommandResult(False, str(reply.get("error", "the daemon refused the command")))
    return _parsed(lambda data: from_dict(CommandResult, data), reply["result"])


def preview_reply(reply: dict[str, Any]) -> CommandPreview:
    """The preview in a ``preview`` answer (`ControlError` when there is none)."""
    if "preview" not in reply:
        raise ControlError(str(reply.get("error", "the daemon gave no preview")))
    return _parsed(lambda data: from_dict(CommandPreview, data), reply["preview"])


@dataclass(frozen=True)
class LoadedConfig:
    """The configuration a daemon runs on, as it read it (the ``config`` op's answer)."""

    path: str
    """The file it was read from (empty: none)."""
    loaded_at: float | None
    """When the daemon read it (at start, or at its last applied reload); None: not said."""
    toml: str
    """The configuration as TOML (`config.file.config_to_toml`)."""


def config_reply(reply: dict[str, Any]) -> LoadedConfig:
    """The configuration in a ``config`` answer.

    Raises:
        ControlError: the daemon refused (an older one knows no such op), or the answer is
            malformed.
    """
    if not reply.get("ok") or not isinstance(reply.get("toml"), str):
        raise ControlError(str(reply.get("error", "the daemon gave no configuration")))
    loaded_at = reply.get("loaded_at")
    return LoadedConfig(
        path=str(reply.get("path") or ""),
        loaded_at=float(loaded_at) if isinstance(loaded_at, int | float) else None,
        toml=reply["toml"],
    )


def logs_reply(reply: dict[str, Any]) -> list[str]:
    """The lines in a ``logs`` answer.

    Raises:
        ControlError: the daemon refused (not its container, no runtime), or a malformed answer.
    """
    lines = reply.get("lines")
    if not reply.get("ok") or not isinstance(lines, list):
        raise ControlError(str(reply.get("error", "the daemon sent no log lines")))
    return [str(line) for line in lines]


def update_of(message: dict[str, Any]) -> Update | None:
    """The snapshot or event in one line of a ``subscribe`` stream (None: something else).

    Raises:
        ControlError: the daemon refused the subscription, or the line is malformed.
    """
    if message.get("type") == "snapshot":
        return _parsed(snapshot_from_dict, message.get("data"))
    if message.get("type") == "event":
        return _parsed(lambda data: from_dict(SupervisorEvent, data), message.get("data"))
    if message.get("ok") is False:
        raise ControlError(str(message.get("error")))
    return None


T = TypeVar("T")


def _parsed(build: Callable[[Any], T], data: Any) -> T:
    try:
        return build(data)
    except ValueError as exc:
        raise ControlError(f"malformed answer from the daemon: {exc}") from None


def request(path: Path, message: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
    """Blocking one-shot request (the CLI's way in).

    Raises:
        ControlError: no daemon, refused, or a malformed answer.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        try:
            sock.connect(str(path))
        except FileNotFoundError:
            raise ControlError(
                f"no gpuci-tui daemon is running (no socket at {path}); start one with: gpuci-tui run"
            ) from None
        except ConnectionRefusedError:
            raise ControlError(
                f"no gpuci-tui daemon answers at {path} (stale socket); start one with: gpuci-tui run"
            ) from None
        except PermissionError:
            raise ControlError(
                f"permission denied on {path}: the daemon belongs to another user"
            ) from None
        except BlockingIOError:
            # The listen backlog is full: the daemon is out of file descriptors or flooded.
            raise ControlError(
                f"the daemon at {path} is not accepting connections (too many clients, or it "
                "ran out of file descriptors: see its log); try again shortly"
            ) from None
        except OSError as exc:
            raise ControlError(
                f"cannot connect to the daemon at {path}: {exc.strerror or exc}"
            ) from None
        # A refusing daemon may hang up first; its answer is still there to be read.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(json.dumps(message).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except TimeoutError:
        raise ControlError(f"the daemon at {path} did not answer within {timeout:.0f} s") from None
    except OSError as exc:
        raise ControlError(
            f"the connection to the daemon at {path} failed: {exc.strerror or exc}"
        ) from None
    finally:
        sock.close()
    try:
        reply = json.loads(data)
    except ValueError:
        raise ControlError(f"malformed answer from the daemon at {path}") from None
    if not isinstance(reply, dict):
        raise ControlError(f"malformed answer from the daemon at {path}")
    return reply


class ControlClient:
    """The typed, blocking client of a daemon's control socket (one connection per request).

    Every method raises `ControlError` when the daemon cannot be reached, and
    `snapshot` and `preview` also when it refuses; a refused command is a
    failed `CommandResult`.
    """

    def __init__(self, path: Path, timeout: float = 10.0) -> None:
        """Talk to the daemon at ``path``, waiting at most ``timeout`` seconds per answer."""
        self.path = path
        self.timeout = timeout

    def hello(self) -> dict[str, Any]:
        """The daemon's pid, instance and protocol version (``ok`` when it answers)."""
        return request(self.path, message("hello"), self.timeout)

    def snapshot(self) -> SupervisorSnapshot:
        """The daemon's current state."""
        return snapshot_reply(request(self.path, message("status"), self.timeout))

    def loaded_config(self) -> LoadedConfig:
        """The configuration the daemon runs on (see `LoadedConfig`)."""
        return config_reply(request(self.path, message("config"), self.timeout))

    def send(self, command: Command) -> CommandResult:
        """Send ``command`` and return the daemon's result."""
        return result_reply(request(self.path, message("command", command), self.timeout))

    def preview(self, command: Command) -> CommandPreview:
        """What ``command`` would do on the daemon now (nothing changes)."""
        return preview_reply(request(self.path, message("preview", command), self.timeout))


class SocketHandle:
    """A `SupervisorHandle` on a daemon's control socket: `ControlClient`, off the event loop."""

    mode = "daemon"

    def __init__(self, path: Path, timeout: float = 10.0) -> None:
        """Talk to the daemon at ``path``."""
        self.path = path
        self.client = ControlClient(path, timeout)
        self._writers: list[asyncio.StreamWriter] = []

    async def hello(self) -> dict[str, Any]:
        """The daemon's pid, instance and protocol version."""
        return await asyncio.to_thread(self.client.hello)

    async def snapshot(self) -> SupervisorSnapshot:
        """The daemon's current state."""
        return await asyncio.to_thread(self.client.snapshot)

    async def send(self, command: Command) -> CommandResult:
        """Send ``command`` and return the daemon's result."""
        return await asyncio.to_thread(self.client.send, command)

    async def preview(self, command: Command) -> CommandPreview:
        """What ``command`` would do on the daemon now."""
        return await asyncio.to_thread(self.client.preview, command)

    async def updates(self) -> AsyncIterator[Update]:
        """Events and snapshots streamed by the daemon until it goes away."""
        try:
            reader, writer = await asyncio.open_unix_connection(str(self.path), limit=MAX_LINE)
        except OSError as exc:
            raise ControlError(
                f"cannot attach to the daemon at {self.path}: {exc.strerror}"
            ) from None
        self._writers.append(writer)
        try:
            writer.write(line_of(message("subscribe")))
            await writer.drain()
            while line := await reader.readline():
                update = update_of(json.loads(line))
                if update is not None:
                    yield update
        finally:
            writer.close()

    async def close(self) -> None:
        """Close the update streams (never stops the daemon)."""
        for writer in self._writers:
            writer.close()
        self._writers.clear()
