"""Helpers for the bad-input corpus: a good configuration on disk, and running code as ``nobody``.

The suite runs as root, for whom permission bits stop nothing; "permission denied"
cases therefore run a small Python child as uid/gid 65534 via ``setpriv`` (the recipe
of tests/real/test_runtime_docker.py), in a world-traversable temporary directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import tomli_w

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config, save_config

GOOD_URL = "https://dev.azure.com/acme"
NOBODY = 65534


def good_config() -> Config:
    """A valid configuration with every section the bad cases touch."""
    return Config(
        azure=AzureConfig(url=GOOD_URL, pool="gpu"),
        agents=AgentsConfig(
            count=2, image="registry.example/gpu-agent:cuda12", name_prefix="gpu01", gpus="all"
        ),
    )


def good_doc() -> dict[str, Any]:
    """`good_config` as the TOML tables a hand-written file would hold."""
    return {
        "azure": {"url": GOOD_URL, "pool": "gpu"},
        "agents": {
            "count": 2,
            "image": "registry.example/gpu-agent:cuda12",
            "name_prefix": "gpu01",
            "gpus": "all",
        },
    }


def write_toml(path: Path, doc: dict[str, Any] | str) -> bytes:
    """Write ``doc`` (tables or raw text) to ``path``; return the bytes written."""
    data = (doc if isinstance(doc, str) else tomli_w.dumps(doc)).encode()
    path.write_bytes(data)
    return data


class Snapshot:
    """The exact bytes of every file under a directory, to prove nothing was lost or added."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files = self._read()

    def _read(self) -> dict[str, bytes]:
        return {
            str(p.relative_to(self.root)): p.read_bytes()
            for p in sorted(self.root.rglob("*"))
            if p.is_file()
        }

    def assert_unchanged(self) -> None:
        """Fail when any file changed, appeared (a .bak, a temp file) or vanished."""
        now = self._read()
        assert sorted(now) == sorted(self.files), f"files changed: {sorted(now)}"
        for name, data in self.files.items():
            assert now[name] == data, f"{name} was rewritten"


def save_good(path: Path) -> bytes:
    """Save `good_config` with the real writer; return the file's bytes."""
    save_config(good_config(), path)
    return path.read_bytes()


@contextlib.contextmanager
def shared_dir(prefix: str) -> Iterator[Path]:
    """A root-owned 0755 directory that ``nobody`` can enter and read but not write."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    directory.chmod(0o755)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def as_nobody(code: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``code`` in a fresh Python as uid/gid 65534 with no groups; return its stdout."""
    result = subprocess.run(
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            sys.executable,
            "-c",
            code,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd), **(env or {})},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


#: A PAT-like value that must never show up in any message.
PAT = "corpusPAT" + uuid.uuid4().hex + uuid.uuid4().hex[:11]
AGAIN = "copy it again from Azure DevOps (User settings > Personal access tokens)."
AGENTS_KEYS = (
    "count, image, name_prefix, network, gpus, gpus_per_slot, volumes, oom_score_adj, mem_limit, docker_socket, "
    "standby, standby_min, standby_max, max_agents, standby_schedule, gpu_admission, gpu_hold_down, pull, "
    "pull_check_interval"
)
