"""A real registry on loopback for the pull tests: Debian's ``docker-registry`` (registry 2.8).

The test runs the binary itself with a temporary configuration (storage in a
temporary folder, ``http.addr`` on 127.0.0.1 and a free port), never the
packaged service; Docker allows plain HTTP to 127.0.0.0/8, so no TLS. With
``users`` it asks for basic auth from an ``htpasswd`` file (apache2-utils, bcrypt).
Images are built locally from the busybox fixture and pushed to it: nothing is
pulled from outside. A `ThrottledProxy` in front of it slows the download so
that a test can stop the registry while a layer is still on its way.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.real.rig import wait_for


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _require(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        # Never a skip: a pull test that did not run is not a pass (CI must fail).
        pytest.fail(
            f"{tool} is required for the pull tests (apt-get install {package}); "
            "scripts/test.sh installs it.",
            pytrace=False,
        )
    return path


@dataclass
class LoopbackRegistry:
    """One ``docker-registry serve`` process of the test's own."""

    root: Path
    users: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        """``127.0.0.1:PORT``: the registry part of an image reference."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Write the configuration and start the registry; wait until it answers."""
        binary = _require("docker-registry", "docker-registry")
        self.root.mkdir(parents=True, exist_ok=True)
        auth = ""
        if self.users:
            htpasswd = _require("htpasswd", "apache2-utils")
            users = self.root / "htpasswd"
            for i, (user, password) in enumerate(self.users.items()):
                flags = "-Bbc" if i == 0 else "-Bb"
                subprocess.run(
                    [htpasswd, flags, str(users), user, password], check=True, capture_output=True
                )
            auth = f"auth:\n  htpasswd:\n    realm: gpuci-test\n    path: {users}\n"
        config = self.root / "config.yml"
        config.write_text(
            "version: 0.1\nlog:\n  level: error\n"
            f"storage:\n  filesystem:\n    rootdirectory: {self.root / 'data'}\n"
            "  delete:\n    enabled: true\n"
            f"http:\n  addr: {self.host}\n{auth}"
        )
        log = (self.root / "registry.log").open("ab")
        self.process = subprocess.Popen(
            [binary, "serve", str(config)], stdout=log, stderr=log, stdin=subprocess.DEVNULL
        )
        log.close()
        wait_for(self.answers, 30, f"the registry on {self.host}")

    def answers(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            log = (self.root / "registry.log").read_text(errors="replace")[-2000:]
            raise AssertionError(f"docker-registry exited ({self.process.returncode}): {log}")
        try:
            urllib.request.urlopen(f"http://{self.host}/v2/", timeout=2).close()
        except urllib.error.HTTPError as exc:
            return exc.code == 401  # up, and asking for credentials
        except OSError:
            return False
        return True

    def kill(self) -> None:
        """SIGKILL the registry (a crash or a pulled cable, from Docker's side) and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def auth(self) -> dict[str, str] | None:
        """docker-py's ``auth_config`` for the first user (None without auth)."""
        if not self.users:
            return None
        user, password = next(iter(self.users.items()))
        return {"username": user, "password": password}


@contextlib.contextmanager
def loopback_registry(
    root: Path, users: dict[str, str] | None = None
) -> Iterator[LoopbackRegistry]:
    """A started registry, killed at the end."""
    registry = LoopbackRegistry(root, dict(users or {}))
    try:
        registry.start()
        yield registry
    finally:
        registry.kill()


def docker_config(folder: Path, host: str, user: str, password: str) -> Path:
    """A Docker ``config.json`` in ``folder`` holding credentials for ``host`` (as `docker login`
    writes them without a credential helper); point ``DOCKER_CONFIG`` at ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    (folder / "config.json").write_text(json.dumps({"auths": {host: {"auth": token}}}))
    return folder


def publish(
    client: Any,
    base: str,
    ref: str,
    size: int,
    *,
    auth: dict[str, str] | None = None,
    keep: bool = False,
) -> str:
    """Build an image from ``base`` with ``size`` random bytes, push it as ``ref``; its digest.

    Random bytes make a layer no other image has, so that once the local copy is
    removed (unless ``keep``) a pull downloads it for real. Whatever ``ref`` named
    on this engine before names it again afterwards (a push from "another machine").
    """
    repo, _, tag = ref.rpartition(":")
    before = None
    with contextlib.suppress(Exception):
        before = client.images.get(ref).id
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, data in (
            ("Dockerfile", f"FROM {base}\nCOPY blob /blob\n".encode()),
            ("blob", os.urandom(size)),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    context.seek(0)
    image, _ = client.images.build(fileobj=context, custom_context=True, rm=True, pull=False)
    image.tag(repo, tag)
    digest = ""
    for line in client.api.push(repo, tag, stream=True, decode=True, auth_config=auth):
        if "error" in line:
            raise AssertionError(f"push of {ref} failed: {line['error']}")
        digest = (line.get("aux") or {}).get("Digest") or digest
    assert digest, f"the push of {ref} reported no digest"
    if not keep:
        client.images.remove(ref)  # its only tag: the image and its own layer go with it
        remove_local(client, image.id)
        if before is not None:
            client.api.tag(before, repo, tag)
    return str(digest)


def remove_local(client: Any, ref: str) -> None:
    """Remove ``ref`` from the engine (and its layers when nothing else uses them)."""
    with contextlib.suppress(Exception):
        client.images.remove(ref, force=True)


def remove_repo(client: Any, ref: str) -> None:
    """Remove every local image of ``ref``'s repository only: tagged, or left with only its
    digest when the tag moved to a newer pull (an image some other name holds stays)."""
    from gpuci_tui.core.docker.images import repository

    repo = repository(ref)
    for image in client.images.list(all=True):
        names = [*(image.attrs.get("RepoTags") or ()), *(image.attrs.get("RepoDigests") or ())]
        if names and all(repository(name) == repo for name in names):
            remove_local(client, image.id)


def unique_repo(prefix: str = "gpuci-pull") -> str:
    """A repository name no other test uses."""
    return f"{prefix}/{uuid.uuid4().hex[:10]}"


class ThrottledProxy:
    """A TCP proxy on loopback that passes the upstream's answers at ``rate`` bytes/s.

    Between Docker and the registry, it keeps a layer download running long
    enough (seconds, not milliseconds) for the test to stop the registry mid-pull.
    When the upstream connection ends (the registry was killed), the client's ends too.
    """

    def __init__(self, upstream_port: int, rate: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.rate = rate
        self.port = free_port()
        self._server = socket.create_server(("127.0.0.1", self.port))
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        self._server.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            self._spawn(self._pump, client, upstream, None)
            self._spawn(self._pump, upstream, client, self.rate)

    def _pump(self, src: socket.socket, dst: socket.socket, rate: int | None) -> None:
        chunk = 16 * 1024
        began, sent = time.monotonic(), 0
        try:
            while not self._stop.is_set():
                data = src.recv(chunk)
                if not data:
                    break
                dst.sendall(data)
                sent += len(data)
                if rate:
                    ahead = sent / rate - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)  # the throttle itself: `rate` bytes a second
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def close(self) -> None:
        self._stop.set()
        self._server.close()
        for thread in self._threads:
            thread.join(5)
