"""`ControlClient`: the CLI, the console and the fleet build requests and read answers one way.

The wire format stays what older daemons and the bridge speak: the requests
are checked as the daemon receives them.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.command_types import Drain, GpuClear
from gpuci_tui.core.host.control.client import ControlClient, ControlError, line_of, message
from gpuci_tui.core.wire import to_dict
from tests.ui.scenarios import loaded_snapshot


class Daemon:
    """A stand-in daemon socket: records each request line, answers from ``replies``."""

    def __init__(self, path: Path, replies: dict[str, dict[str, Any]]) -> None:
        self.lines: list[bytes] = []
        self.replies = replies
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                line = conn.makefile("rb").readline()
                self.lines.append(line)
                op = json.loads(line)["op"]
                conn.sendall(json.dumps(self.replies[op]).encode() + b"\n")


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[Path, Daemon]]:
    path = tmp_path / "control.sock"
    snap = loaded_snapshot()
    fake = Daemon(
        path,
        {
            "hello": {"ok": True, "protocol": 1, "pid": 7, "instance": "i"},
            "status": {"ok": True, "snapshot": to_dict(snap)},
            "command": {"ok": False, "result": {"ok": False, "message": "no such slot"}},
            "preview": {"ok": False, "error": "bad command: nope"},
        },
    )
    yield path, fake
    fake.server.close()


def test_typed_calls_send_the_protocols_requests(daemon: tuple[Path, Daemon]) -> None:
    path, fake = daemon
    client = ControlClient(path, timeout=5.0)
    assert client.hello()["pid"] == 7
    assert client.snapshot() == loaded_snapshot()
    result = client.send(Drain((9,)))
    assert not result.ok and result.message == "no such slot"
    with pytest.raises(ControlError, match="bad command: nope"):
        client.preview(GpuClear("0"))
    assert [json.loads(line) for line in fake.lines] == [
        {"op": "hello"},
        {"op": "status"},
        {"op": "command", "command": {"type": "drain", "slots": [9], "group": None}},
        {"op": "preview", "command": {"type": "gpu_clear", "gpu": "0"}},
    ]


def test_a_subscription_line_is_the_one_the_bridge_recognises() -> None:
    assert line_of(message("subscribe")) == b'{"op":"subscribe"}\n'
    assert line_of(message("hello")) == b'{"op":"hello"}\n'


def test_no_daemon_is_a_control_error(tmp_path: Path) -> None:
    with pytest.raises(ControlError, match="no gpuci-tui daemon is running"):
        ControlClient(tmp_path / "absent.sock").snapshot()
