"""What every command needs: the configuration, its instance and its socket."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpuci_tui.core.agentspec import instance_id
from gpuci_tui.core.config import Config

from . import exitcodes


class CliExit(Exception):
    """Stop the command with ``code`` after printing ``message`` to stderr."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def config_path(args: argparse.Namespace) -> Path:
    """``--config`` beats ``$GPUCI_CONFIG`` beats the XDG default."""
    from gpuci_tui.core.paths import resolve_config_path

    return resolve_config_path(getattr(args, "config", None))


def host_gpu_count() -> int | None:
    """How many GPUs NVML sees, or None when NVML is not available (then not checked)."""
    from gpuci_tui.core.gpu import NvmlSampler

    sampler = NvmlSampler()
    try:
        info = sampler.host_info()
        return info.gpu_count if info.available else None
    finally:
        sampler.close()


def load(args: argparse.Namespace, *, check_gpus: bool = False) -> Config:
    """Load and validate the configuration or raise `CliExit` (code 4) with the problems.

    ``check_gpus`` also checks ``gpus = "per-agent"`` against the GPUs NVML sees
    (``run`` and ``check-config``; the control commands need no NVML).
    """
    from gpuci_tui.core.config import load_config
    from gpuci_tui.core.protocols import GpuciError

    try:
        gpu_count = host_gpu_count() if check_gpus else None
        return load_config(config_path(args), gpu_count=gpu_count)
    except GpuciError as exc:  # ConfigError, PathError
        raise CliExit(exitcodes.CONFIG, str(exc)) from None


def socket_for(config: Config) -> Path:
    """The control socket of the daemon that supervises ``config``'s agents."""
    from gpuci_tui.core.paths import socket_path
    from gpuci_tui.core.protocols import GpuciError

    try:
        return socket_path(instance_id(config))
    except GpuciError as exc:  # an unusable runtime directory
        raise CliExit(exitcodes.CONFIG, str(exc)) from None


def fail(exc: CliExit) -> int:
    """Print the message of ``exc`` and return its code."""
    print(f"gpuci-tui: {exc.message}", file=sys.stderr)
    return exc.code
