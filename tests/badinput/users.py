"""A throwaway second local user, and connection floods run as that user.

The suite runs as root; what another user of the machine can do is tested by
creating a real account (``useradd``), running a child as it with ``setpriv``
and deleting the account afterwards.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.machine import machine_lock

#: The flooding child: opens N connections, sends each a fragment, reports how many
#: it holds, then keeps them open until its standard input closes.
FLOOD = r"""
import socket, sys
family, address, count, fragment = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
held = []
for _ in range(count):
    if family == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        target = address
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        host, port = address.rsplit(":", 1)
        target = (host, int(port))
    s.settimeout(5)
    try:
        s.connect(target)
        s.sendall(fragment.encode())
    except OSError:
        s.close()
        continue
    held.append(s)
print(len(held), flush=True)
sys.stdin.read()
"""


@dataclass(frozen=True)
class LocalUser:
    """An account that exists for one test."""

    name: str
    uid: int
    gid: int

    def argv(self, *command: str) -> list[str]:
        """``command`` run as this user, with no supplementary groups."""
        return [
            "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.gid}",
            "--clear-groups",
            *command,
        ]


@contextlib.contextmanager
def local_user() -> Iterator[LocalUser]:
    """Create a throwaway user; delete it afterwards.

    Without root this fails, never skips: the suite runs as root (it installs and starts
    its own Docker engine), and a security test that did not run is not a pass.
    """
    if os.geteuid() != 0:
        pytest.fail("creating a second local user needs root: run the suite as root")
    name = f"gpuci{uuid.uuid4().hex[:8]}"
    # One account change at a time on the machine: useradd and userdel lock /etc/passwd
    # and give up after some seconds when tests beside this one hold it.
    with machine_lock("users"):
        subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            check=True,
            capture_output=True,
        )
    try:
        entry = pwd.getpwnam(name)
        yield LocalUser(name, entry.pw_uid, entry.pw_gid)
    finally:
        with machine_lock("users"):
            subprocess.run(["userdel", name], check=False, capture_output=True)


@contextlib.contextmanager
def flood(
    address: str, count: int, *, user: LocalUser | None = None, fragment: str = "GET /met"
) -> Iterator[int]:
    """Hold ``count`` half-sent connections to ``address`` (``HOST:PORT`` or a socket path).

    Yields how many connections the child holds (some may have been closed by the
    server already); they stay open until the block ends.
    """
    family = "tcp" if ":" in address and not address.startswith("/") else "unix"
    command = [sys.executable, "-c", FLOOD, family, address, str(count), fragment]
    argv = user.argv(*command) if user is not None else command
    child = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.strip().isdigit(), f"the flood did not start (exit {child.poll()})"
        yield int(line)
    finally:
        if child.stdin is not None:
            child.stdin.close()
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def open_fds(pid: int) -> int:
    """How many file descriptors process ``pid`` holds."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def thread_count(pid: int) -> int:
    """How many threads process ``pid`` runs."""
    return len(os.listdir(f"/proc/{pid}/task"))
