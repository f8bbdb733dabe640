"""Fixtures for the simulation's tests."""

from __future__ import annotations

import io
import tarfile

import pytest

from gpuci_tui.sim.org import SimOrg
from tests.waiting import wait_until  # noqa: F401 - the simulation tests import it from here

PAT = "sim-pat-0123456789abcdefghijklmnopqrstuvwxyz0123456789"
READ_ONLY_PAT = "sim-pat-readonly-0123456789abcdefghijklmnopqrstuvwx"
NO_SCOPE_PAT = "sim-pat-noscope-0123456789abcdefghijklmnopqrstuvwxy"
TOKEN_PATH = "/run/azp/token"


@pytest.fixture
def org() -> SimOrg:
    """An organisation with one pool 'gpu' (id 42) and three PATs of different scopes."""
    o = SimOrg(heartbeat_timeout=0.5)
    o.add_pat(PAT)
    o.add_pat(READ_ONLY_PAT, scopes=("agentpools",))
    o.add_pat(NO_SCOPE_PAT, scopes=("build",))
    o.add_pool("gpu")
    return o


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
