"""Fixtures for the simulation's tests."""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Callable
from typing import Any

import pytest

from gpuci_tui.sim.image import build_emulator_image
from gpuci_tui.sim.org import SimOrg

PAT = "sim-pat-0123456789abcdefghijklmnopqrstuvwxyz0123456789"
READ_ONLY_PAT = "sim-pat-readonly-0123456789abcdefghijklmnopqrstuvwx"
NO_SCOPE_PAT = "sim-pat-noscope-0123456789abcdefghijklmnopqrstuvwxy"
TOKEN_PATH = "/run/azp/token"


def wait_until(pred: Callable[[], object], timeout: float = 5.0, what: str = "condition") -> None:
    """Poll ``pred`` every 10 ms; fail the test with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.01)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture
def org() -> SimOrg:
    """An organisation with one pool 'gpu' (id 42) and three PATs of different scopes."""
    o = SimOrg(heartbeat_timeout=0.5)
    o.add_pat(PAT)
    o.add_pat(READ_ONLY_PAT, scopes=("agentpools",))
    o.add_pat(NO_SCOPE_PAT, scopes=("build",))
    o.add_pool("gpu")
    return o


@pytest.fixture(scope="session")
def emulator_image(docker_client: Any) -> str:
    """The busybox agent emulator image, built locally (never pulled)."""
    return build_emulator_image(docker_client)


def token_tar(token: str, path: str = TOKEN_PATH) -> bytes:
    """A tar of ``path`` (in /run/azp) holding ``token``, for ``put_archive("/", ...)``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        d = tarfile.TarInfo("run/azp")
        d.type, d.mode = tarfile.DIRTYPE, 0o700
        tar.addfile(d)
        data = token.encode()
        f = tarfile.TarInfo(path.lstrip("/"))
        f.size, f.mode = len(data), 0o600
        tar.addfile(f, io.BytesIO(data))
    return buf.getvalue()
