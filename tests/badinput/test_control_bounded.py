"""The control socket against clients that misbehave: too many, silent, half-sent,
oversized or malformed. Each gets an error reply or a timely close; none costs
the daemon a traceback, a thread or an unbounded share of its descriptors."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.host.control import serving
from gpuci_tui.core.host.control.client import ControlError, request
from gpuci_tui.core.host.control.server import ControlServer
from gpuci_tui.core.host.control.serving import BoundedListener, RateLimitedLog
from tests.badinput.stubs import StubSupervisor
from tests.waiting import wait_until_async

CAP = 4


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ControlServer]:
    control = ControlServer(
        StubSupervisor(),  # type: ignore[arg-type]
        tmp_path / "run" / "s.sock",
        max_clients=CAP,
        request_timeout=1.0,
        idle_timeout=2.0,
    )
    await control.start()
    yield control
    await control.close()


async def exchange(path: Path, *lines: bytes) -> list[Any]:
    """Send ``lines`` on one connection; the replies until the daemon closes."""
    reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 22)
    try:
        replies: list[Any] = []
        for line in lines:
            writer.write(line)
            await writer.drain()
            raw = await asyncio.wait_for(reader.readline(), 20)
            if not raw:
                break
            replies.append(json.loads(raw))
        return replies
    finally:
        writer.close()


async def closed_within(path: Path, send: bytes, seconds: float) -> bool:
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(send)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), seconds) == b""
    finally:
        writer.close()


async def test_malformed_requests_each_get_an_error_reply_on_the_same_connection(
    server: ControlServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    bad = [
        b"not json\n",
        b"[1, 2]\n",
        b"\xff\xfe\n",
        b'{"op": "command", "command": [1]}\n',
        b'{"op": "command", "command": {"type": "scale", "count": "x"}}\n',
        b'{"op": "preview", "command": {"type": "drain", "slots": [1]}}\n',
        b'{"op": "reboot"}\n',
        b"[" * 200_000 + b"]" * 200_000 + b"\n",
        b'{"op": "status", "x": ' + b"[" * 100 + b"]" * 100 + b"}\n",
    ]
    replies = await exchange(server.path, *bad, b'{"op": "hello"}\n')
    assert len(replies) == len(bad) + 1, replies
    for line, reply in zip(bad, replies, strict=False):
        assert reply["ok"] is False and reply["error"], (line[:40], reply)
    assert "nested deeper than" in replies[-3]["error"]
    assert "nested deeper than" in replies[-2]["error"]
    assert replies[-1]["ok"] is True  # the connection survived all of them
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


async def test_a_10_mb_line_gets_an_error_and_a_close(
    server: ControlServer, caplog: pytest.LogCaptureFixture
) -> None:
    reader, writer = await asyncio.open_unix_connection(str(server.path), limit=1 << 22)
    writer.write(b'{"op": "status", "pad": "' + b"a" * 10_000_000 + b'"}\n')
    drain = asyncio.ensure_future(writer.drain())
    reply = json.loads(await asyncio.wait_for(reader.readline(), 20))
    assert reply == {"ok": False, "error": "bad request: longer than 1048576 bytes"}
    # Closed (a reset, since the rest of the line was never read).
    with contextlib.suppress(ConnectionResetError):
        assert await asyncio.wait_for(reader.read(), 10) == b""
    drain.cancel()
    writer.close()
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


async def test_silent_and_half_sent_clients_are_closed_after_the_timeout(
    server: ControlServer,
) -> None:
    assert await closed_within(server.path, b"", 10)
    assert await closed_within(server.path, b'{"op": "sta', 10)
    # Between requests a connection may wait longer, but not for ever.
    reader, writer = await asyncio.open_unix_connection(str(server.path))
    writer.write(b'{"op": "hello"}\n')
    assert json.loads(await reader.readline())["ok"] is True
    started = time.monotonic()
    assert await asyncio.wait_for(reader.read(), 10) == b""
    assert time.monotonic() - started > 1.5  # the idle timeout, not the request timeout
    writer.close()


async def test_clients_over_the_cap_are_told_and_closed_and_status_answers_after(
    server: ControlServer,
) -> None:
    held = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(50)]
    try:
        for sock in held:
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                sock.connect(str(server.path))
        await wait_until_async(
            lambda: server.rejected >= 40, 20, lambda: f"40 rejected, not {server.rejected}"
        )
        deadline = time.monotonic() + 20
        assert server.clients <= CAP
        # The capped clients time out; then the owner's status is served again.
        reply = None
        while reply is None:
            assert time.monotonic() < deadline
            answer = await asyncio.to_thread(request, server.path, {"op": "status"}, 5)
            reply = answer if answer.get("ok") else None
            if reply is None:
                assert "busy" in answer["error"]
                await asyncio.sleep(0.2)  # the pace of the retries while it says busy
    finally:
        for sock in held:
            sock.close()


def test_a_full_backlog_is_a_clear_error_for_the_cli(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(0)  # never accepts: a daemon out of descriptors
    queued: list[socket.socket] = []
    try:
        for _ in range(100):
            queued.append(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            queued[-1].setblocking(False)
            try:
                queued[-1].connect(str(path))
            except BlockingIOError:
                break
        with pytest.raises(ControlError) as caught:
            request(path, {"op": "status"}, timeout=2)
        assert "not accepting connections" in str(caught.value)
    finally:
        for sock in queued:
            sock.close()
        listener.close()


class ExhaustedSocket(socket.socket):
    """A listening socket whose accept fails as a process out of descriptors does."""

    calls = 0

    def accept(self) -> tuple[socket.socket, Any]:
        type(self).calls += 1
        raise OSError(errno.EMFILE, "Too many open files")


async def test_accept_failures_pause_and_are_logged_once_a_minute_without_a_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(serving, "ACCEPT_PAUSE", 0.05)
    sock = ExhaustedSocket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(tmp_path / "x.sock"))
    sock.listen()

    async def never(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise AssertionError("nothing can be accepted")

    listener = BoundedListener(sock, never, what="the control socket /x")
    listener.start()
    waiting = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    waiting.connect(str(tmp_path / "x.sock"))  # keeps the listener readable
    try:
        await wait_until_async(
            lambda: ExhaustedSocket.calls >= 20,
            20,
            lambda: f"20 calls, not {ExhaustedSocket.calls}",
        )
    finally:
        listener.close()
        waiting.close()
    lines = [r for r in caplog.records if "cannot accept connections" in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None
    assert "Too many open files" in lines[0].getMessage()
    assert listener.accept_errors.total >= 20


def test_the_rate_limited_log_reports_the_count_when_it_speaks_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    limited = RateLimitedLog(logging.getLogger("t"), 60.0, clock=lambda: now[0])
    caplog.set_level(logging.WARNING)
    for step in range(130):
        now[0] = step
        limited.warning("full")
    assert [r.getMessage() for r in caplog.records] == [
        "full",
        "full (59 more like this in the last 60 s)",
        "full (59 more like this in the last 60 s)",
    ]
