"""DockerRuntime when the engine is missing, refuses us, or drops its event stream.

The engine is shared: nothing here restarts it; a broken event stream is produced
with a Unix-socket relay in front of it instead.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from gpuci_tui.core.docker.events import STREAM_ENDED
from gpuci_tui.core.docker.runtime import DockerRuntime
from gpuci_tui.core.errors import RuntimeUnavailableError
from tests.real.docker_runtime_helpers import (
    DOCKER_SOCKET,
    EventCollector,
    make_spec,
    secret,
    wait_until,
)

pytestmark = pytest.mark.docker


# --------------------------------------------------------------------------- unreachable engines


def test_missing_socket() -> None:
    rt = DockerRuntime(base_url="unix:///nonexistent.sock")
    expected = (
        "Docker engine not reachable: /nonexistent.sock does not exist. "
        "Is Docker installed and running? (systemctl start docker)"
    )
    with pytest.raises(RuntimeUnavailableError) as caught:
        rt.ping()
    assert str(caught.value) == expected
    with pytest.raises(RuntimeUnavailableError, match="does not exist"):
        rt.start(make_spec("x", "y", "img"), secret())
    with pytest.raises(RuntimeUnavailableError, match="does not exist"):
        rt.list_containers({"a": "b"})


def test_socket_nobody_answers_on() -> None:
    directory = tempfile.mkdtemp(prefix="gpuci-rt-")
    path = os.path.join(directory, "docker.sock")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(path)  # bound but never listening: connections are refused
    try:
        with pytest.raises(RuntimeUnavailableError) as caught:
            DockerRuntime(base_url=f"unix://{path}").ping()
    finally:
        dead.close()
        os.unlink(path)
        os.rmdir(directory)
    assert str(caught.value).startswith(f"Docker engine not running: {path} exists")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_unreachable_docker_host(monkeypatch: pytest.MonkeyPatch) -> None:
    port = closed_port()
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{port}")
    with pytest.raises(RuntimeUnavailableError) as caught:
        DockerRuntime(timeout=5).ping()
    assert str(caught.value) == (
        f"Docker engine at tcp://127.0.0.1:{port} (DOCKER_HOST) cannot be reached: connection "
        "refused. Check that the engine runs there and that the address is right, or unset "
        "DOCKER_HOST to use the local socket."
    )
    monkeypatch.setenv("DOCKER_HOST", "bogus://engine")
    with pytest.raises(RuntimeUnavailableError, match="DOCKER_HOST 'bogus://engine' is not usable"):
        DockerRuntime().ping()


@pytest.mark.root
def test_permission_denied_for_a_user_outside_the_docker_group() -> None:
    directory = tempfile.mkdtemp(prefix="gpuci-perm-")
    os.chmod(directory, 0o755)
    path = os.path.join(directory, "docker.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen()
    os.chmod(path, 0o600)  # like /var/run/docker.sock for someone not in the group
    code = (
        "from gpuci_tui.core.docker.runtime import DockerRuntime\n"
        "try:\n"
        f"    DockerRuntime(base_url='unix://{path}').ping()\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    try:
        result = subprocess.run(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                sys.executable,
                "-c",
                code,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=directory,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": directory},
            check=False,
        )
    finally:
        listener.close()
        os.unlink(path)
        os.rmdir(directory)
    assert result.stdout.strip() == (
        f"RuntimeUnavailableError Permission denied on {path}: add your user to the 'docker' "
        "group (sudo usermod -aG docker $USER, then log in again) or run as root"
    ), result.stderr


# --------------------------------------------------------------------------- stream loss


class SocketRelay:
    """A Unix-socket relay to the Docker socket that the test can cut and bring back.

    Cutting it closes every relayed connection and removes the socket file, which
    is what the client sees when the engine stops; the shared engine is untouched.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        listener.listen(16)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(DOCKER_SOCKET)
            with self._lock:
                self._conns.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                readable, _, _ = select.select([a, b], [], [], 0.5)
                for src in readable:
                    chunk = src.recv(65536)
                    if not chunk:
                        return
                    (b if src is a else a).sendall(chunk)
        except (OSError, ValueError):
            return
        finally:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.close()
            with self._lock:
                self._conns.difference_update((a, b))

    def cut(self) -> None:
        assert self._listener is not None
        self._listener.close()
        os.unlink(self.path)
        with self._lock:
            conns = list(self._conns)
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def test_event_stream_lost_and_restored(busybox_image: str, run_label: str) -> None:
    directory = tempfile.mkdtemp(prefix="gpuci-relay-")
    relay = SocketRelay(os.path.join(directory, "docker.sock"))
    relay.start()
    rt = DockerRuntime(base_url=f"unix://{relay.path}")
    collector = EventCollector(rt, {"gpuci.test": run_label}, time.time() - 1)
    try:
        first = rt.start(make_spec(run_label, "before", busybox_image), secret())
        collector.wait_for(lambda e: e.action == "start" and e.container_id == first.id)

        relay.cut()
        lost = collector.wait_for(lambda e: e.action == "stream-lost")
        # docker-py ends the iteration quietly when the socket goes away.
        assert lost.message == STREAM_ENDED
        # An outage spanning several failed reconnect attempts is still one "lost".
        attempts = rt.api_call_count
        assert wait_until(lambda: rt.api_call_count >= attempts + 2)
        assert len(collector.seen(lambda e: e.action == "stream-lost")) == 1

        relay.start()
        collector.wait_for(lambda e: e.action == "stream-restored", timeout=15)
        second = rt.start(make_spec(run_label, "after", busybox_image), secret())
        collector.wait_for(lambda e: e.action == "start" and e.container_id == second.id)
        actions = [e.action for e in collector.events]
        assert actions.index("stream-lost") < actions.index("stream-restored")
        assert collector.close() < 1.0
    finally:
        collector.stop.set()
        rt.close()
        with contextlib.suppress(OSError):
            relay.cut()
        with contextlib.suppress(OSError):
            os.rmdir(directory)
