"""``gpuci-tui bridge`` talks only the gpuci-tui protocol, only to a gpuci-tui daemon,
and enforces ``--readonly`` itself.

Before: ``bridge --socket`` piped bytes to any Unix socket (Docker's included) and
passed stop/scale whatever ``--readonly`` said.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuci_tui.cli.bridge_cmd import pump
from tests.badinput.stubs import served

BRIDGE = [sys.executable, "-m", "gpuci_tui.cli.main"]
DOCKER_SOCKET = Path("/var/run/docker.sock")


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gpuci-bp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def bridge(socket_path: Path, stdin: bytes, *flags: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*BRIDGE, *flags, "bridge", "--socket", str(socket_path)],
        input=stdin,
        capture_output=True,
        timeout=60,
    )


def replies(out: subprocess.CompletedProcess[bytes]) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.stdout.splitlines()]


class HttpLike:
    """A Unix socket service that is not gpuci-tui: it answers anything with an HTTP error."""

    def __init__(self, path: Path) -> None:
        self.received = bytearray()
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(4)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(10)
            try:
                while data := conn.recv(4096):
                    self.received += data
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                pass


def test_a_socket_that_is_not_a_gpuci_daemon_is_refused_and_nothing_is_relayed(
    sock_dir: Path,
) -> None:
    other = HttpLike(sock_dir / "other.sock")
    try:
        out = bridge(sock_dir / "other.sock", b"GET /containers/json HTTP/1.1\r\nHost: x\r\n\r\n")
    finally:
        other.server.close()
    assert out.returncode == 1
    assert out.stdout == b""
    assert b"is not a gpuci-tui daemon's control socket" in out.stderr
    assert bytes(other.received) == b'{"op":"hello"}\n'  # only the bridge's own question


def test_dockers_socket_is_refused(sock_dir: Path) -> None:
    # The suite runs a Docker engine (scripts/test.sh starts one): no socket is a failure.
    assert DOCKER_SOCKET.exists(), f"no Docker socket at {DOCKER_SOCKET}: start dockerd"
    out = bridge(DOCKER_SOCKET, b"GET /containers/json HTTP/1.1\r\nHost: docker\r\n\r\n")
    assert out.returncode == 1, out.stderr
    assert out.stdout == b""
    assert b"is not a gpuci-tui daemon's control socket" in out.stderr


def test_only_known_ops_reach_the_daemon_and_the_rest_get_an_error(sock_dir: Path) -> None:
    path = sock_dir / "d.sock"
    with served(path) as stub:
        out = bridge(
            path,
            b'{"op":"hello"}\n'
            b"GET / HTTP/1.1\n"
            b'{"op":"some-op"}\n'
            b"[1]\n" + b"[" * 100_000 + b"\n"
            b'{"op":"command","command":{"type":"drain","slots":[1]}}\n'
            b'{"op":"status"}',
        )
    assert out.returncode == 0, out.stderr
    got = replies(out)
    assert [r["ok"] for r in got] == [True, False, False, False, False, True, True], got
    assert "unknown op 'some-op'" in str(got[2]["error"])
    assert len(stub.executed) == 1


def test_refusals_keep_their_place_when_one_read_brings_several_answers() -> None:
    """Seen on a loaded machine: the daemon's answers came in one read, and the bridge
    wrote them all before the refusal owed between them."""
    daemon, bridge_end = socket.socketpair()
    requests_r, requests_w = os.pipe()
    answers_r, answers_w = os.pipe()
    pumping = threading.Thread(target=pump, args=(bridge_end, requests_r, answers_w))
    pumping.start()
    try:
        os.write(requests_w, b'{"op":"hello"}\nnot json\n{"op":"status"}\n')
        os.close(requests_w)
        daemon.settimeout(10)
        received = b""
        while received.count(b"\n") < 2:
            received += daemon.recv(4096)
        assert received == b'{"op":"hello"}\n{"op":"status"}\n'
        daemon.sendall(b'{"ok":true,"n":1}\n{"ok":true,"n":2}\n')  # both answers at once
        daemon.close()
        pumping.join(10)
        assert not pumping.is_alive()
        os.close(answers_w)
        with os.fdopen(answers_r, "rb") as out:
            got = [json.loads(line) for line in out.read().splitlines()]
    finally:
        bridge_end.close()
    assert [(r["ok"], r.get("n")) for r in got] == [(True, 1), (False, None), (True, 2)], got


def test_readonly_refuses_every_command_but_lets_status_and_preview_through(
    sock_dir: Path,
) -> None:
    path = sock_dir / "d.sock"
    commands = [
        {"type": "stop", "drain": False},
        {"type": "scale", "count": 1},
        {"type": "drain", "slots": [1]},
        {"type": "pause"},
    ]
    requests = b"".join(
        json.dumps({"op": "command", "command": c}).encode() + b"\n" for c in commands
    )
    for flags in (("--readonly",), ()):
        argv_flags = flags
        with served(path) as stub:
            out = subprocess.run(
                [*BRIDGE, "bridge", *argv_flags, "--socket", str(path)],
                input=requests + b'{"op":"status"}\n',
                capture_output=True,
                timeout=60,
            )
            assert out.returncode == 0, out.stderr
            got = replies(out)
            assert got[-1]["ok"] is True and "snapshot" in got[-1]
            if flags:
                assert stub.executed == []
                assert all("read-only" in str(r["error"]) for r in got[:-1]), got
            else:
                assert len(stub.executed) == len(commands)
    # The global form (before the subcommand) works too.
    with served(path) as stub:
        out = bridge(path, requests, "--readonly")
    assert stub.executed == [] and all(r["ok"] is False for r in replies(out))
