"""Simulated GPU hosts for the fleet tests: a real sshd on 127.0.0.1 and a real daemon per host.

Each "host" is one sshd (ed25519 host key, key-only login, a free port on
127.0.0.1, killed by PID afterwards) whose sessions get that host's own
environment with ``SetEnv``: its XDG directories, its configuration
(``GPUCI_CONFIG``) and its PAT file. Behind it runs a real ``gpuci-tui run``
(`tests.real.rig.make_rig`: its own simulated organisation, the busybox
emulator image on the real Docker engine). The client side is an ssh
configuration file of the lab's own (client key, known hosts), so the
tests never read or write ~/.ssh.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.real.rig import Rig, make_rig, wait_for
from tests.real.test_tmux_demo import Tmux

GPUCI = str(Path(sys.executable).parent / "gpuci-tui")


def require(ok: bool, what: str) -> None:
    """A missing component fails the test (never a skip): scripts/test.sh installs them."""
    if not ok:
        pytest.fail(
            f"{what} is required for this test and is missing. Run scripts/test.sh, "
            "which installs it (apt-get install openssh-server openssh-client).",
            pytrace=False,
        )


def sshd_binary() -> str:
    found = shutil.which("sshd", path="/usr/sbin:/usr/local/sbin:" + os.environ.get("PATH", ""))
    require(found is not None, "sshd (openssh-server)")
    require(shutil.which("ssh") is not None, "ssh (openssh-client)")
    return str(found)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Host:
    """One simulated host: its sshd, its environment and its daemon's rig."""

    name: str
    port: int
    env: dict[str, str]
    rig: Rig
    sshd: subprocess.Popen[bytes] | None = None
    daemon: subprocess.Popen[bytes] | None = None

    @property
    def target(self) -> str:
        return f"{getpass.getuser()}@127.0.0.1:{self.port}"

    def start_daemon(self) -> None:
        """``gpuci-tui run`` with this host's environment; returns when it answers."""
        log = open(self.rig.config_path.parent / f"daemon-{len(self.rig.procs)}.log", "wb")  # noqa: SIM115
        self.daemon = subprocess.Popen(
            [sys.executable, "-m", "gpuci_tui.cli.main", "run"],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        self.rig.procs.append(self.daemon)
        wait_for(lambda: self.status() or self.daemon.poll() is not None, 30, f"{self.name} up")
        assert self.daemon.poll() is None, self.rig.daemon_log()

    def kill_daemon(self) -> None:
        """The daemon dies without cleaning up (its socket file stays behind)."""
        assert self.daemon is not None
        self.daemon.send_signal(signal.SIGKILL)
        self.daemon.wait(10)

    def status(self) -> dict[str, Any] | None:
        """``gpuci-tui status --json`` run as on the host (None: no daemon answers)."""
        out = subprocess.run(
            [sys.executable, "-m", "gpuci_tui.cli.main", "status", "--json"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        return json.loads(out.stdout) if out.returncode == 0 else None

    def states(self) -> list[str]:
        return [s["state"] for s in (self.status() or {}).get("slots", [])]


@dataclass
class SshLab:
    """The client key, known hosts and ssh configuration shared by the lab's hosts."""

    root: Path
    stack: contextlib.ExitStack
    docker_client: Any
    image: str
    hosts: list[Host] = field(default_factory=list)

    @property
    def ssh_config(self) -> Path:
        return self.root / "ssh_config"

    def setup(self) -> None:
        sshd_binary()
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation
        for name in ("client_key",):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.root / name)],
                check=True,
                timeout=30,
            )
        (self.root / "known_hosts").touch()
        self.ssh_config.write_text(
            "Host *\n"
            f"  IdentityFile {self.root / 'client_key'}\n"
            "  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {self.root / 'known_hosts'}\n"
            "  StrictHostKeyChecking yes\n"
            "  LogLevel ERROR\n"
        )

    def add_host(self, name: str, tmp: Path, **rig_options: Any) -> Host:
        """A host: own organisation, config, XDG dirs and PAT file, its sshd started."""
        base = tmp / name
        base.mkdir()
        rig = self.stack.enter_context(
            contextlib.contextmanager(make_rig)(base, self.docker_client, self.image, **rig_options)
        )
        env = dict(rig.env, GPUCI_CONFIG=str(rig.config_path))
        for var, sub in (("XDG_CONFIG_HOME", "cfg"), ("XDG_STATE_HOME", "state"),
                         ("XDG_RUNTIME_DIR", "run"), ("XDG_DATA_HOME", "data")):  # fmt: skip
            (base / sub).mkdir(mode=0o700)
            env[var] = str(base / sub)
        rig.env = env
        host = Host(name, free_port(), env, rig)
        (self.root / f"{name}_host_key").unlink(missing_ok=True)
        subprocess.run(
            [
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-f",
                str(self.root / f"{name}_host_key"),
            ],
            check=True,
            timeout=30,
        )
        public = (self.root / f"{name}_host_key.pub").read_text().split()[:2]
        with (self.root / "known_hosts").open("a") as known:
            known.write(f"[127.0.0.1]:{host.port} {' '.join(public)}\n")
        shutil.copy(self.root / "client_key.pub", self.root / f"{name}_authorized_keys")
        passed = ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "XDG_DATA_HOME",
                  "GPUCI_CONFIG", "GPUCI_PAT_FILE")  # fmt: skip
        (self.root / f"{name}_sshd_config").write_text(
            f"ListenAddress 127.0.0.1\nPort {host.port}\n"
            f"HostKey {self.root / f'{name}_host_key'}\n"
            f"AuthorizedKeysFile {self.root / f'{name}_authorized_keys'}\n"
            "PidFile none\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nX11Forwarding no\n"
            "SetEnv " + " ".join(f"{var}={env[var]}" for var in passed) + "\n"
        )
        self.hosts.append(host)
        self.start_sshd(host)
        return host

    def start_sshd(self, host: Host) -> None:
        """Start (or restart) the host's sshd; returns when it greets."""
        log = open(self.root / f"{host.name}_sshd.log", "ab")  # noqa: SIM115
        host.sshd = subprocess.Popen(
            [sshd_binary(), "-D", "-e", "-f", str(self.root / f"{host.name}_sshd_config")],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        wait_for(lambda: _greets(host.port) or host.sshd.poll() is not None, 15, "sshd")
        assert host.sshd.poll() is None, (self.root / f"{host.name}_sshd.log").read_text()

    def kill_sshd(self, host: Host) -> None:
        """The host's SSH server dies, with every session it serves (by PID)."""
        assert host.sshd is not None
        try:
            children = psutil.Process(host.sshd.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            children = []
        host.sshd.kill()
        host.sshd.wait(10)
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()

    def close(self) -> None:
        for host in self.hosts:
            if host.sshd is not None and host.sshd.poll() is None:
                self.kill_sshd(host)


def control_dir_of(console: Tmux) -> Path | None:
    """The ssh directory of the fleet console running in ``console`` (None: not made yet).

    It is the argument of the console's janitor (a child of the console): found
    through the console's own processes, not by listing /tmp, where the consoles of
    other tests running at the same time keep theirs too.
    """
    for proc in console.processes():
        try:
            words = proc.cmdline()
        except psutil.Error:
            continue
        if "gpuci_tui.cli.fleet_janitor" in words[:-1]:
            return Path(words[words.index("gpuci_tui.cli.fleet_janitor") + 1])
    return None


def ssh_of(control: Path) -> list[list[str]]:
    """ssh clients and masters of the console whose ssh directory is ``control``."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        words = proc.info["cmdline"] or []
        if proc.info["name"] == "ssh" and any(str(control) in w for w in words):
            found.append(words)
    return found


def _greets(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            return conn.recv(8).startswith(b"SSH-")
    except OSError:
        return False


@contextlib.contextmanager
def ssh_lab(tmp_path: Path, docker_client: Any, image: str) -> Iterator[SshLab]:
    """The lab; every sshd is killed and every rig torn down afterwards."""
    root = Path(_short_dir())
    with contextlib.ExitStack() as stack:
        lab = SshLab(root, stack, docker_client, image)
        try:
            lab.setup()
            yield lab
        finally:
            lab.close()
            shutil.rmtree(root, ignore_errors=True)


def _short_dir() -> str:
    # ControlPath and socket names must stay under 108 bytes: not below pytest's tmp_path.
    return tempfile.mkdtemp(prefix="gpuci-lab-", dir="/tmp")
