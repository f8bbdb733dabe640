"""The demo's own instance: one temporary folder that holds everything the demo makes.

An instance of gpuci-tui keeps its files where the XDG directories say
(`core.config.paths`): its configuration, its state (lock, intent, job history,
daemon log), its runtime directory (the control socket) and its data directory
(keyring files). ``gpuci-tui demo`` points all of them into one folder,
``/tmp/gpuci-demo-XXXXXXXX``, writes its configuration file there and runs the
daemon of ``gpuci-tui run`` on it, so every command can be tried on the demo and
nothing outside the folder is touched. The folder goes when the demo ends.

Another shell reaches the demo with its configuration file: ``gpuci-tui
--config FOLDER/config.toml status``, or ``export GPUCI_CONFIG=FOLDER/config.toml``
once. A command given that file finds the folder's `MARKER` beside it (`adopt`)
and points its own XDG directories and keyring into the folder, as the demo did:
``status``, ``history``, ``token check``, the console... then find the demo's
socket, history and PAT where they find a real instance's.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuci_tui.core.protocols import GpuSampler

__all__ = ["MARKER", "PREFIX", "DemoInstance", "DemoNotes", "adopt", "demo_gpus", "notes_of"]

MARKER = "demo-instance.json"
"""Beside the demo's configuration file: says the folder is a demo's instance."""
PREFIX = "gpuci-demo-"
_DIRECTORIES = (
    ("XDG_CONFIG_HOME", "config"),
    ("XDG_STATE_HOME", "state"),
    ("XDG_DATA_HOME", "data"),
    ("XDG_CACHE_HOME", "cache"),
    ("XDG_RUNTIME_DIR", "run"),
)
KEYRING_VARIABLE = "PYTHON_KEYRING_BACKEND"


@dataclass(frozen=True)
class DemoNotes:
    """What the marker says of the running demo."""

    pid: int
    """The demo's process."""
    pull: str = ""
    """Why ``gpuci-tui image pull`` pulls nothing for this demo, and what it would do
    (empty: it pulls, e.g. from the registry ``demo --docker`` runs on 127.0.0.1)."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """More variables a process on the instance needs (the demo tenant's CA, with
    ``--auth service-principal``)."""
    gpus: str = ""
    """The demo's synthetic GPUs, ``MODEL:COUNT`` (`sim.gpu_synthetic`): what its agents
    have and advertise, instead of this host's ("": none, ``--docker``)."""


@dataclass(frozen=True)
class DemoInstance:
    """One demo's folder and the environment that points gpuci-tui into it."""

    root: Path

    @classmethod
    def create(cls) -> DemoInstance:
        """A new private folder (0700) under the temporary directory, with its XDG parts."""
        root = Path(tempfile.mkdtemp(prefix=PREFIX))
        for _, name in _DIRECTORIES:
            (root / name).mkdir(mode=0o700)
        return cls(root)

    @property
    def config_path(self) -> Path:
        """The demo's configuration file."""
        return self.root / "config.toml"

    @property
    def marker_path(self) -> Path:
        """`MARKER` in the folder."""
        return self.root / MARKER

    def environ(self) -> dict[str, str]:
        """The XDG directories in the folder, and the demo's keyring (`demo_keyring`)."""
        from gpuci_tui.demo_keyring import BACKEND_NAME

        found = {variable: str(self.root / name) for variable, name in _DIRECTORIES}
        return {**found, KEYRING_VARIABLE: BACKEND_NAME}

    def enter(self, more: Mapping[str, str] | None = None) -> None:
        """Point this process's gpuci-tui files into the folder (and set ``more``)."""
        os.environ.update({**self.environ(), **(more or {})})

    def publish(self, notes: DemoNotes) -> None:
        """Write `MARKER` (0600): from now on commands given the configuration adopt it."""
        data = {
            "root": str(self.root),
            "pid": notes.pid,
            "pull": notes.pull,
            "environment": dict(notes.environment),
            "gpus": notes.gpus,
        }
        fd = os.open(self.marker_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2)

    def remove(self) -> None:
        """Remove the folder and everything in it."""
        shutil.rmtree(self.root, ignore_errors=True)

    def how_to_reach(self) -> str:
        """What to type in another shell to use the command line on this demo."""
        config = shlex.quote(str(self.config_path))
        return "\n".join(
            [
                f"The demo's instance is {self.root} (removed when the demo ends).",
                "Try the command line on it from another shell:",
                f"  gpuci-tui --config {config} status",
                "or, for every command of that shell:",
                f"  export GPUCI_CONFIG={config}",
                "  gpuci-tui status; gpuci-tui history; gpuci-tui reload --dry-run; "
                "gpuci-tui agents prune --dry-run; gpuci-tui token check",
            ]
        )


def notes_of(config_file: Path) -> DemoNotes | None:
    """The notes of the demo whose configuration ``config_file`` is; None for any other file.

    Only a regular marker file of ours, naming the folder it is in, counts.
    """
    marker = config_file.parent / MARKER
    try:
        info = marker.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
            return None
        data = json.loads(marker.read_text(encoding="utf-8"))
        if Path(data["root"]) != config_file.parent:
            return None
        environment = data.get("environment") or {}
        return DemoNotes(
            pid=int(data["pid"]),
            pull=str(data.get("pull") or ""),
            environment={str(k): str(v) for k, v in dict(environment).items()},
            gpus=str(data.get("gpus") or ""),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def adopt(config_file: Path) -> DemoNotes | None:
    """When ``config_file`` is a running demo's, point this process into its folder.

    Called before any command runs (``cli.main``), so every command finds the
    demo's socket, history and keyring as it finds a real instance's. Any other
    file changes nothing (None).
    """
    notes = notes_of(config_file)
    if notes is not None:
        DemoInstance(config_file.parent).enter(notes.environment)
    return notes


def demo_gpus(config_file: Path) -> GpuSampler | None:
    """The GPUs of the demo whose configuration ``config_file`` is: its synthetic ones.

    Commands that read "this host's" GPUs (``check-config``, ``gpu capabilities``)
    read these for a demo's file: its agents run and advertise on them, not on the
    host's. None for any other file, and for a demo without GPUs.
    """
    notes = notes_of(config_file)
    model, _, count = (notes.gpus if notes is not None else "").partition(":")
    if not count.isdigit():
        return None
    from gpuci_tui.sim.gpu_synthetic import SyntheticSampler

    return SyntheticSampler(gpus=int(count), model=model, seed=0)
