"""A Docker engine of the test's own, for drills that must stop or restart one.

The suite never stops an engine it did not start: on a workstation or a shared
CI runner the host's engine runs other people's containers. A drill that needs
to take Docker away from the supervisor starts this one instead, with its own
socket, data root, exec root and pid file (and so its own managed containerd
under the exec root), no bridge and no iptables rules, and stops it at the end.
Images are copied in from the host engine (``docker save`` → ``docker load``),
or pulled from the test's own loopback registry (tests/real/registry.py), never
from outside. `small_root_engine` gives one whose data root is a small tmpfs, so
that "free space" is small and real (the disk and full-disk pull drills).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.real.rig import wait_for


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


def host_engine_pid() -> int | None:
    """The pid of the engine that answers on the default socket (None when none does)."""
    out = subprocess.run(
        ["docker", "info", "--format", "{{.ID}}"], capture_output=True, timeout=30, check=False
    )
    if out.returncode != 0:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if argv and Path(argv[0].decode(errors="replace")).name == "dockerd":
                hosts = [a for a in argv if a.startswith((b"--host", b"-H"))]
                if not hosts or any(b"/var/run/docker.sock" in h for h in hosts):
                    return int(proc.name)
    return None


@dataclass
class PrivateEngine:
    """One dockerd started by a test; `start`/`stop` may be called repeatedly."""

    root: Path
    log_path: Path = field(init=False)
    process: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.log_path = self.root / "dockerd.log"

    @property
    def socket(self) -> Path:
        return self.root / "docker.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def pidfile(self) -> Path:
        return self.root / "docker.pid"

    def argv(self) -> list[str]:
        return [
            "dockerd",
            f"--host={self.url}",
            f"--data-root={self.root / 'data'}",
            f"--exec-root={self.root / 'exec'}",
            f"--pidfile={self.pidfile}",
            "--bridge=none",
            "--iptables=false",
            "--ip-masq=false",
            "--ip-forward=false",
            "--userland-proxy=false",
        ]

    def answers(self) -> bool:
        out = subprocess.run(
            ["docker", "--host", self.url, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            timeout=30,
            check=False,
        )
        return out.returncode == 0

    def start(self, timeout: float = 60.0) -> None:
        """Start the engine and wait until it answers."""
        assert self.process is None or self.process.poll() is not None, "already running"
        # Not with the test's environment: its XDG_* directories are pytest temporaries.
        env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
        env.pop("DOCKER_HOST", None)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        try:
            wait_for(self.answers, timeout, f"the private dockerd on {self.socket}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.log_tail()}") from None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM the engine (its containers die with it: no live-restore) and reap it."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)

    def client(self) -> Any:
        import docker

        return docker.DockerClient(base_url=self.url, timeout=30)

    def copy_image(self, host_client: Any, tag: str) -> None:
        """Copy ``tag`` from the host engine into this one (save → load; never a pull).

        ``named=tag``, not ``True``: with True docker-py names the tarball by the image's
        *first* tag, and an image another test tagged again (the history bench's
        ``gpuci-bench/history-agent:v2`` is the emulator) arrived under that name only.
        """
        data = b"".join(host_client.images.get(tag).save(named=tag))
        engine = self.client()
        try:
            engine.images.load(data)
        finally:
            engine.close()

    def log_tail(self, size: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-size:]
        return ""

    def remove(self) -> None:
        """Stop the engine, remove whatever containers' mounts it left, delete its root."""
        self.stop()
        mounts = [
            line.split()[1]
            for line in Path("/proc/self/mounts").read_text().splitlines()
            if line.split()[1].startswith(str(self.root))
        ]
        for mount in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def private_engine() -> Iterator[PrivateEngine]:
    """A started private engine, removed with everything under its root on exit."""
    # A short root under /tmp: a Unix socket path must stay under 108 bytes.
    root = Path(tempfile.mkdtemp(prefix="gpuci-de-", dir="/tmp"))
    engine = PrivateEngine(root)
    host_before = host_engine_pid()
    try:
        engine.start()
        yield engine
    finally:
        engine.remove()
        # The promise this module exists for: the host's engine is the one it was.
        assert host_engine_pid() == host_before, "the host's Docker engine changed under the test"


@contextlib.contextmanager
def small_root_engine(
    size: int, kind: type[PrivateEngine] = PrivateEngine
) -> Iterator[PrivateEngine]:
    """A started private engine (of ``kind``) whose data root is a tmpfs of ``size`` bytes.

    Mounting needs root; without it the drill fails (never skips): a disk drill
    that did not run is not a pass.
    """
    if os.geteuid() != 0:
        pytest.fail(
            "mounting a tmpfs data root needs root: run the suite as root (as CI does); "
            "a disk drill that did not run is not a pass"
        )
    root = Path(tempfile.mkdtemp(prefix="gpuci-dk-", dir="/tmp"))  # short: socket path limit
    engine = kind(root)
    host_before = host_engine_pid()
    try:
        (root / "data").mkdir()
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(root / "data")],
            check=True,
            capture_output=True,
        )
        engine.start()
        yield engine
    finally:
        engine.remove()  # stops it and unmounts everything under its root, the tmpfs too
        assert host_engine_pid() == host_before, "the host's Docker engine changed"
