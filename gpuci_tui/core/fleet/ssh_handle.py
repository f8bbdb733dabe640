"""`SshHandle`: the daemon of another host, reached through the operator's own ``ssh``.

Every channel is one ``ssh HOST gpuci-tui bridge`` process. The bridge, on the
host, joins its stdin and stdout to the daemon's control socket byte for byte,
so the JSON-lines protocol of `control` (hello, status, command, preview,
subscribe, logs, history and whatever comes later) passes through unchanged. One persistent
channel carries requests; each `updates` call opens its own stream.

How ssh is run (BatchMode, a private connection master per host, keep-alives)
is `ssh_command`'s business.

Nothing here blocks the event loop (ssh is an asyncio subprocess in its own
session, so it can never read the console's terminal) and every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from gpuci_tui.core.command_types import Command, CommandResult
from gpuci_tui.core.config.fleet_host import FleetHost
from gpuci_tui.core.engine.preview import CommandPreview
from gpuci_tui.core.fleet.ssh_command import (
    SshSettings,
    bridge_argv,
    destination,
    explain_exit,
    ssh_options,
)
from gpuci_tui.core.host.control.client import (
    MAX_LINE,
    ControlError,
    line_of,
    logs_reply,
    message,
    preview_reply,
    result_reply,
    snapshot_reply,
    update_of,
)
from gpuci_tui.core.host.control.history_serving import history_reply, history_request
from gpuci_tui.core.host.handle import Update
from gpuci_tui.core.models import PROTOCOL_VERSION, SupervisorSnapshot
from gpuci_tui.core.store.history import JobQuery, JobRecord

STDERR_KEEP = 4096
"""Bytes of a channel's stderr kept for the error message."""
CLOSE_TIMEOUT = 3.0


class _Channel:
    """One ``ssh … bridge`` process: JSON lines in and out, stderr kept for the reason."""

    def __init__(self, process: asyncio.subprocess.Process, command: str) -> None:
        self.process = process
        self.command = command
        self.stderr = bytearray()
        self._reader = asyncio.get_running_loop().create_task(self._drain_stderr())

    @classmethod
    async def start(cls, argv: Sequence[str], command: str) -> _Channel:
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=MAX_LINE,
                start_new_session=True,  # never the console's terminal, never its Ctrl-C
            )
        except OSError as exc:
            raise ControlError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
        return cls(process, command)

    async def _drain_stderr(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        while chunk := await stream.read(1024):
            self.stderr += chunk
            del self.stderr[:-STDERR_KEEP]

    @property
    def ended(self) -> bool:
        return self.process.returncode is not None or self.process.stdout is None

    async def write(self, request: dict[str, Any], timeout: float) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        try:
            stdin.write(line_of(request))
            await asyncio.wait_for(stdin.drain(), timeout)
        except (ConnectionError, RuntimeError):
            raise ControlError(await self.reason()) from None
        except TimeoutError:
            raise ControlError(f"the host took no request for {timeout:.0f} s") from None

    async def read(self, timeout: float | None) -> dict[str, Any] | None:
        """The next JSON object, or None when the channel ended."""
        stdout = self.process.stdout
        assert stdout is not None
        try:
            line = await asyncio.wait_for(stdout.readline(), timeout)
        except TimeoutError:
            raise ControlError(f"no answer from the host within {timeout:.0f} s") from None
        except (ValueError, asyncio.LimitOverrunError):
            raise ControlError("the host sent a line longer than 1 MiB") from None
        if not line:
            return None
        try:
            answer = json.loads(line)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            text = line.decode(errors="replace").strip()[:120]
            raise ControlError(f"the bridge sent something that is not the protocol: {text!r}")
        return answer

    async def reason(self) -> str:
        """Why the channel ended (waits briefly for the exit code and the last stderr)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.process.wait(), CLOSE_TIMEOUT)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._reader), 0.5)
        text = self.stderr.decode(errors="replace")
        return explain_exit(self.process.returncode, text, self.command)

    async def close(self) -> None:
        process = self.process
        if process.stdin is not None:
            process.stdin.close()
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                await asyncio.wait_for(process.wait(), CLOSE_TIMEOUT)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


class SshHandle:
    """A `SupervisorHandle` on the daemon of ``host``, over ssh and ``gpuci-tui bridge``."""

    mode = "daemon"

    def __init__(self, host: FleetHost, command: str, settings: SshSettings) -> None:
        """Reach ``host``'s daemon by running ``command bridge`` there (nothing starts yet)."""
        self.host = host
        self.command = command
        self.settings = settings
        self.info: dict[str, Any] = {}
        """The daemon's last ``hello`` answer (pid, instance, protocol)."""
        self._requests: _Channel | None = None
        self._lock = asyncio.Lock()
        self._streams: set[_Channel] = set()
        self._closed = False
        """`close` was called: no channel opens after it (a view's last read may still come)."""

    def argv(self) -> list[str]:
        """The ssh command line of one channel."""
        return bridge_argv(self.host, self.command, self.settings)

    async def _open(self) -> _Channel:
        if self._closed:
            raise ControlError(f"the connection to {self.host.target} was closed")
        channel = await _Channel.start(self.argv(), self.command)
        try:
            await self._hello(
                channel, self.settings.connect_timeout + self.settings.request_timeout
            )
        except BaseException:
            await channel.close()
            raise
        return channel

    async def _hello(self, channel: _Channel, timeout: float) -> None:
        await channel.write(message("hello"), timeout)
        reply = await channel.read(timeout)
        if reply is None:
            raise ControlError(await channel.reason())
        if not reply.get("ok"):
            raise ControlError(str(reply.get("error") or "the daemon refused the connection"))
        if reply.get("protocol") != PROTOCOL_VERSION:
            raise ControlError(
                f"the daemon speaks control protocol {reply.get('protocol')}, this console "
                f"{PROTOCOL_VERSION}: run the same gpuci-tui version on both sides"
            )
        self.info = reply

    async def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        timeout = self.settings.request_timeout
        async with self._lock:
            channel = self._requests
            if channel is not None and channel.ended:
                await self._drop(channel)
                channel = None
            if channel is not None and request.get("op") == "command":
                # A command is never sent twice: check first that the channel still works.
                try:
                    await self._hello(channel, timeout)
                except ControlError:
                    await self._drop(channel)
                    channel = None
            fresh = channel is None
            if channel is None:
                channel = self._requests = await self._open()
            try:
                await channel.write(request, timeout)
                reply = await channel.read(timeout)
                if reply is None:
                    raise ControlError(await channel.reason())
            except ControlError:
                await self._drop(channel)
                if fresh or request.get("op") == "command":
                    raise
                return await self._retry(request)
            return reply

    async def _retry(self, request: dict[str, Any]) -> dict[str, Any]:
        """Once more on a new channel (only for requests that change nothing)."""
        channel = self._requests = await self._open()
        try:
            await channel.write(request, self.settings.request_timeout)
            reply = await channel.read(self.settings.request_timeout)
            if reply is None:
                raise ControlError(await channel.reason())
        except ControlError:
            await self._drop(channel)
            raise
        return reply

    async def _drop(self, channel: _Channel) -> None:
        if self._requests is channel:
            self._requests = None
        await channel.close()

    async def hello(self) -> dict[str, Any]:
        """The daemon's pid, instance and protocol version."""
        return await self._call(message("hello"))

    async def snapshot(self) -> SupervisorSnapshot:
        """The daemon's current state."""
        return snapshot_reply(await self._call(message("status")))

    async def send(self, command: Command) -> CommandResult:
        """Send ``command`` and return the daemon's result.

        A command whose answer never came may or may not have been applied; the
        error says so rather than sending it again.
        """
        try:
            reply = await self._call(message("command", command))
        except ControlError as exc:
            raise ControlError(f"{exc} (the command may or may not have been applied)") from None
        return result_reply(reply)

    async def preview(self, command: Command) -> CommandPreview:
        """What ``command`` would do on the daemon now."""
        return preview_reply(await self._call(message("preview", command)))

    async def logs_tail(self, container_id: str, lines: int) -> list[str]:
        """The last ``lines`` of one of the daemon's containers (redacted and bounded there)."""
        return logs_reply(
            await self._call({"op": "logs", "container": container_id, "tail": lines})
        )

    async def history(self, query: JobQuery) -> list[JobRecord] | None:
        """The daemon's finished jobs matching ``query``, newest first (None: none recorded yet).

        Read-only, redacted and bounded by the daemon (`history_serving`).
        """
        return history_reply(await self._call(history_request(query)))

    async def updates(self) -> AsyncIterator[Update]:
        """Events and snapshots streamed by the daemon, until the channel ends (then raises)."""
        channel = await self._open()
        self._streams.add(channel)
        try:
            await channel.write(message("subscribe"), self.settings.request_timeout)
            timeout: float | None = self.settings.request_timeout
            while (answer := await channel.read(timeout)) is not None:
                timeout = None  # a quiet daemon is fine: ServerAlive watches the link
                update = update_of(answer)
                if update is not None:
                    yield update
            raise ControlError(await channel.reason())
        finally:
            self._streams.discard(channel)
            await channel.close()

    async def close(self) -> None:
        """Close every channel and this host's connection master (never stops the daemon)."""
        self._closed = True
        channels = [*self._streams, *([self._requests] if self._requests else [])]
        self._requests = None
        self._streams.clear()
        await asyncio.gather(*(channel.close() for channel in channels))
        if self.settings.control_dir is not None:
            await self._exit_master()

    async def _exit_master(self) -> None:
        argv = [self.settings.ssh, *ssh_options(self.settings), "-O", "exit"]
        argv += destination(self.host)
        try:
            channel = await _Channel.start(argv, self.settings.ssh)
        except ControlError:
            return  # no ssh: then there is no master either
        await channel.reason()  # waits (bounded) for the master to be told
        await channel.close()
