"""Helpers for tests that drive the fake libnvidia-ml.so.1 (tests/fixtures/fake_nvml.c)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config, save_config

CliRun = Callable[..., subprocess.CompletedProcess[str]]


class NvmlState:
    """The fake library's state file (``$FAKE_NVML_STATE``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, text: str) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(self.path)  # atomic: the library never reads half a file


def cli_on_fake_nvml(
    fake_nvml_lib: Path, tmp_path: Path, gpus: str, nvml_state: str
) -> tuple[Path, CliRun]:
    """A two-slot configuration with ``gpus`` and the fake library's state, written.

    Returns:
        The configuration's path, and ``run(*argv)``: the real ``gpuci-tui --config PATH
        *argv`` with the fake library (built by the ``fake_nvml_lib`` fixture) on
        LD_LIBRARY_PATH, reading ``nvml_state``.
    """
    path = tmp_path / "config.toml"
    agents = AgentsConfig(count=2, image="acme/agent:1", name_prefix="h", gpus=gpus)
    save_config(Config(azure=AzureConfig("https://dev.azure.com/acme", "gpu"), agents=agents), path)
    state = tmp_path / "nvml-state"
    state.write_text(nvml_state)
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_nvml_lib.parent), FAKE_NVML_STATE=str(state))

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return run_cli(path, env, *argv)

    return path, run


def run_cli(path: Path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    """The real ``gpuci-tui --config PATH *argv`` in ``env``."""
    return subprocess.run(
        [sys.executable, "-m", "gpuci_tui.cli.main", "--config", str(path), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
