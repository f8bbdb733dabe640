"""``gpuci-tui bridge``: bytes both ways unchanged, a clear refusal without a daemon, a clean end."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from gpuci_tui.cli.bridge_cmd import pump
from gpuci_tui.core.config.loader import save_config
from gpuci_tui.core.config.paths import socket_path
from gpuci_tui.core.docker.agentspec import instance_id
from gpuci_tui.core.models import PROTOCOL_VERSION
from tests.ui.scenarios import sample_config

BRIDGE = [sys.executable, "-m", "gpuci_tui.cli.main", "bridge"]


class FakeDaemon:
    """A Unix socket server that runs ``serve(conn)`` for each connection, in a thread."""

    def __init__(self, path: Path, serve: Callable[[socket.socket], None]) -> None:
        self.path = path
        self.serve = serve
        self.received = bytearray()
        self.accepted = threading.Event()
        self.closed = threading.Event()
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(4)
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        try:
            conn, _ = self.server.accept()
        except OSError:
            return
        self.accepted.set()
        with conn:
            self.serve(conn)
        self.closed.set()

    def stop(self) -> None:
        self.server.close()


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    """A short directory for sockets (a Unix socket path must stay under 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="gpuci-br-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


HELLO = b'{"ok":true,"protocol":%d,"pid":1,"instance":"fake"}\n' % PROTOCOL_VERSION


def answer_hello(conn: socket.socket) -> None:
    """Answer the bridge's own hello, as a daemon does."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(1)
        if not chunk:
            return
        data += chunk
    assert data == b'{"op":"hello"}\n'
    conn.sendall(HELLO)


def echo_until_eof_then_bye(daemon: list[FakeDaemon]) -> Callable[[socket.socket], None]:
    def serve(conn: socket.socket) -> None:
        answer_hello(conn)
        while data := conn.recv(4096):
            daemon[0].received += data
            conn.sendall(data)
        conn.sendall(b'{"bye":true}\n')  # the answer still gets out after the client's EOF

    return serve


def test_requests_and_answers_pass_both_ways_and_eof_is_a_half_close(sock_dir: Path) -> None:
    holder: list[FakeDaemon] = []
    daemon = FakeDaemon(sock_dir / "d.sock", echo_until_eof_then_bye(holder))
    holder.append(daemon)
    # Requests of the protocol (in its compact form), answers whatever the daemon says.
    payload = b'{"op":"hello"}\n{"op":"status","x":[1,2]}\n{"op":"preview","command":{}}\n' * 200
    try:
        out = subprocess.run(
            [*BRIDGE, "--socket", str(daemon.path)],
            input=payload,
            capture_output=True,
            timeout=30,
        )
    finally:
        daemon.stop()
    assert out.returncode == 0, out.stderr
    assert bytes(daemon.received) == payload
    assert out.stdout == payload + b'{"bye":true}\n'
    assert out.stderr == b""


def test_it_refuses_clearly_when_no_daemon_runs(sock_dir: Path) -> None:
    missing = sock_dir / "none.sock"
    out = subprocess.run(
        [*BRIDGE, "--socket", str(missing)], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 3
    assert out.stdout == ""
    assert out.stderr == (
        f"gpuci-tui: no gpuci-tui daemon is running on this host (no socket at {missing}); "
        "start one there with: gpuci-tui run\n"
    )


def test_a_stale_socket_is_named_as_such(sock_dir: Path) -> None:
    stale = sock_dir / "stale.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(stale))
    server.close()  # the file stays, nobody listens: a daemon that was killed
    out = subprocess.run(
        [*BRIDGE, "--socket", str(stale)], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 3
    assert "(a stale socket at" in out.stderr


def test_it_finds_the_daemon_of_its_configuration(sock_dir: Path, tmp_path: Path) -> None:
    config = sample_config()
    path = tmp_path / "config.toml"
    save_config(config, path)
    target = socket_path(instance_id(config))
    holder: list[FakeDaemon] = []
    daemon = FakeDaemon(target, echo_until_eof_then_bye(holder))
    holder.append(daemon)
    try:
        out = subprocess.run(
            [sys.executable, "-m", "gpuci_tui.cli.main", "bridge", "--config", str(path)],
            input=b'{"op":"status"}\n',
            capture_output=True,
            timeout=30,
        )
    finally:
        daemon.stop()
        target.unlink(missing_ok=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == b'{"op":"status"}\n{"bye":true}\n'


def test_a_broken_configuration_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[agents]\ncount = 0\n")
    out = subprocess.run(
        [*BRIDGE[:-1], "--config", str(path), "bridge"], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 4
    assert out.stdout == ""
    assert "agents.count: must be a whole number from 1 to 64, got 0" in out.stderr


def test_it_ends_when_nobody_reads_its_output_even_if_the_daemon_is_quiet(sock_dir: Path) -> None:
    """The ssh channel closed: the bridge must not linger until the daemon next speaks."""
    release = threading.Event()
    daemon = FakeDaemon(
        sock_dir / "quiet.sock", lambda conn: (answer_hello(conn), release.wait(60))[1]
    )
    proc = subprocess.Popen(
        [*BRIDGE, "--socket", str(daemon.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert daemon.accepted.wait(10), "the bridge never connected"
        assert proc.stdout is not None
        proc.stdout.close()  # the reader goes away; stdin stays open
        assert proc.wait(10) == 0
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        daemon.stop()
    assert daemon.closed.wait(10), "the bridge left its daemon connection open"


def test_many_requests_at_once_never_deadlock_the_bridge(sock_dir: Path) -> None:
    """A bridge blocked sending requests stopped reading answers, and the daemon, blocked
    writing answers, stopped reading requests: with enough small lines both waited forever."""
    holder: list[FakeDaemon] = []
    daemon = FakeDaemon(sock_dir / "d.sock", echo_until_eof_then_bye(holder))
    holder.append(daemon)
    payload = b'{"op":"status","x":[1,2]}\n' * 20_000
    try:
        out = subprocess.run(
            [*BRIDGE, "--socket", str(daemon.path)], input=payload, capture_output=True, timeout=60
        )
    finally:
        daemon.stop()
    assert out.returncode == 0, out.stderr
    assert out.stdout == payload + b'{"bye":true}\n'


def test_a_subscribed_bridge_ends_as_soon_as_its_input_closes(sock_dir: Path) -> None:
    """A console that went away leaves no stream behind: the daemon never stops streaming by
    itself, so the bridge must end at its own end of input (it used to stream on for 38 s)."""
    stop = threading.Event()

    def stream(conn: socket.socket) -> None:
        answer_hello(conn)
        conn.recv(4096)  # the subscription
        while not stop.is_set():
            try:
                conn.sendall(b'{"type":"snapshot","data":{}}\n')
            except OSError:
                return
            stop.wait(0.05)

    daemon = FakeDaemon(sock_dir / "s.sock", stream)
    proc = subprocess.Popen(
        [*BRIDGE, "--socket", str(daemon.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b'{"op":"subscribe"}\n')
        proc.stdin.flush()
        assert proc.stdout.readline().startswith(b'{"type":"snapshot"'), "no stream"
        proc.stdin.close()
        assert proc.wait(3) == 0, "the bridge kept streaming after its input closed"
        assert daemon.closed.wait(10), "the bridge left its daemon connection open"
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        daemon.stop()


def test_a_bridge_whose_session_is_gone_ends_even_if_its_input_stays_open(
    sock_dir: Path,
) -> None:
    """The watchdog: the process that ran the bridge (sshd's session) died, the bridge's
    input is held open by someone else: it notices its new parent and ends."""
    release = threading.Event()
    daemon = FakeDaemon(sock_dir / "q.sock", lambda conn: (answer_hello(conn), release.wait(60))[1])
    session = subprocess.Popen(
        ["sh", "-c", 'exec 3<&0; "$@" <&3 & wait', "sh", *BRIDGE, "--socket", str(daemon.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert daemon.accepted.wait(10), "the bridge never connected"
        (bridge,) = psutil.Process(session.pid).children()
        session.kill()
        session.wait(10)
        # A lasting state, a generous deadline: it ends within a second on a quiet host.
        bridge.wait(30)  # psutil.TimeoutExpired: the bridge outlived its session
        assert not bridge.is_running()
    finally:
        release.set()
        if session.stdin is not None:
            session.stdin.close()
        daemon.stop()
    assert daemon.closed.wait(10), "the bridge left its daemon connection open"


def test_a_session_that_ended_while_the_bridge_connected_is_noticed() -> None:
    """The parent is taken when the bridge starts: when the session died before the pump
    began, the bridge had taken its new parent as its session's and lived on for good."""
    ours, daemons = socket.socketpair()
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    failed: list[BaseException] = []

    def bridge() -> None:
        try:
            pump(ours, read_in, write_out, parent=os.getppid() + 1)  # not our parent now
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            failed.append(exc)

    try:
        done = threading.Thread(target=bridge)
        done.start()
        done.join(30)
        assert not done.is_alive(), "the pump ignored that its session is gone"
        assert not failed, failed
    finally:
        for fd in (read_in, write_in, read_out, write_out):
            os.close(fd)
        ours.close()
        daemons.close()
