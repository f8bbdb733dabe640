"""What every command needs: the configuration, its instance and its socket."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from gpuci_tui.core.config.loader import Config, agent_groups, daemon_instance
from gpuci_tui.core.config.slot_shapes import HostTopology
from gpuci_tui.core.gpu_readings import GpuFrame
from gpuci_tui.core.protocols import GpuSampler, ImageConfig

from . import exitcodes

if TYPE_CHECKING:
    from gpuci_tui.core.command_types import CommandResult


class CliExit(Exception):
    """Stop the command with ``code`` after printing ``message`` to stderr."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def config_path(args: argparse.Namespace) -> Path:
    """``--config`` beats ``$GPUCI_CONFIG`` beats the XDG default."""
    from gpuci_tui.core.config.paths import resolve_config_path

    return resolve_config_path(getattr(args, "config", None))


class HostGpus:
    """This host's GPUs as a configuration's checks read them, through one NVML sampler."""

    def __init__(self, config_file: Path | None = None) -> None:
        """Take one sample (no NVIDIA driver: `frame` says the GPUs are not available).

        For a demo's ``config_file``, the demo's synthetic GPUs (`demo_instance.demo_gpus`).
        """
        from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler
        from gpuci_tui.demo_instance import demo_gpus

        self._sampler: GpuSampler = (
            demo_gpus(config_file) if config_file else None
        ) or NvmlSampler()
        self.frame: GpuFrame = self._sampler.sample()

    def topology(self) -> HostTopology:
        """How the GPUs are joined (NVLink, PCIe) and their MIG devices (read when asked:
        only shaped slots need it).
        """
        from gpuci_tui.core.gpu.nvml_topology import topology_reader

        return topology_reader(self._sampler)()

    def close(self) -> None:
        """Release NVML."""
        self._sampler.close()


def uses_gpus(config: Config) -> bool:
    """Whether any agent group of ``config`` is given GPUs."""
    return any(g.agents.gpus != "none" for g in agent_groups(config))


Unread = Literal["quiet", "note", "refuse"]
"""What `load` does when the host's GPUs cannot be read for a file that uses GPUs."""


def load(
    args: argparse.Namespace,
    *,
    check_gpus: bool = False,
    unread: Unread = "quiet",
    host_paths_here: bool = True,
    cuda_fatal: bool = True,
) -> Config:
    """Load and validate the configuration or raise `CliExit` (code 4) with the problems.

    ``host_paths_here`` False: volume host paths need not exist on this machine
    (``export kubernetes``: they are on the cluster's nodes).

    ``check_gpus`` also checks the configuration against the GPUs NVML sees, by
    the rules ``run`` starts with (``run`` and ``check-config``; the control
    commands need no NVML): counts, slot shapes (``gpus_per_slot``, MIG) on the
    topology, GPU ids that do not exist (errors) and GPUs other processes hold
    (warnings, printed to stderr), and each group's image against the driver's
    CUDA: an error with ``cuda_fatal`` (``check-config``), else a warning (``run``
    starts and holds that group's slots, the other groups run). Without NVML these
    are not checked; for a configuration that gives agents GPUs ``unread`` says what
    then: nothing (``run``: no driver is no GPU), a note on stderr (``check-config``),
    or a refusal, exit 1 (``check-config --host``).
    """
    from gpuci_tui.core.errors import GpuciError

    try:
        path = config_path(args)
        with contextlib.closing(HostGpus(path)) if check_gpus else contextlib.nullcontext() as gpus:
            return _load(path, gpus, unread, host_paths_here, cuda_fatal)
    except GpuciError as exc:  # ConfigError, PathError
        raise CliExit(exitcodes.CONFIG, str(exc)) from None


def _load(
    path: Path, gpus: HostGpus | None, unread: Unread, host_paths_here: bool, cuda_fatal: bool
) -> Config:
    """`load` with the host's GPUs (None: not checked)."""
    from gpuci_tui.core.config.file import raise_if_any
    from gpuci_tui.core.config.loader import load_config
    from gpuci_tui.core.config.slot_shapes import is_shaped, shape_problems
    from gpuci_tui.core.gpu.check import check_host_gpus, check_images_cuda

    frame = gpus.frame if gpus is not None and gpus.frame.host.available else None
    config = load_config(
        path, gpu_count=frame.host.gpu_count if frame else None, host_paths_here=host_paths_here
    )
    if gpus is not None and frame is not None:
        errors, warnings = check_host_gpus(config, frame, ours=own_containers(config))
        if any(is_shaped(g.agents) for g in agent_groups(config)):
            errors += shape_problems(config, gpus.topology())
        refused = check_images_cuda(config, frame, _image_config)
        if cuda_fatal:
            errors += refused
        else:
            warnings += [
                f"{e.key}: {e.problem}; its slots start nothing until then" for e in refused
            ]
        raise_if_any(errors, path)
        for warning in warnings:
            print(f"gpuci-tui: warning: {warning}", file=sys.stderr)
    elif gpus is not None and unread != "quiet" and uses_gpus(config):
        said = (
            f"this host's GPUs cannot be read ({gpus.frame.host.reason or 'NVML sees no GPU'}), "
            "so the configuration was not checked against them (GPU count, slot shapes, GPU "
            "ids, CUDA of the images)"
        )
        if unread == "refuse":
            raise CliExit(exitcodes.FAILED, said)
        print(f"gpuci-tui: note: {said}", file=sys.stderr)
    return config


def _image_config(image: str) -> ImageConfig | None:
    """The local image's configuration (None when Docker cannot be asked)."""
    from gpuci_tui.core.docker.runtime import DockerRuntime
    from gpuci_tui.core.errors import GpuciError

    try:
        return DockerRuntime().image_config(image)
    except GpuciError:
        return None


def own_containers(config: Config) -> set[str]:
    """Ids of the agent containers of this configuration (empty when Docker is unusable)."""
    from gpuci_tui.core.docker.agentspec import LABEL_PROJECT, PROJECT
    from gpuci_tui.core.docker.runtime import DockerRuntime
    from gpuci_tui.core.errors import GpuciError

    try:
        listed = DockerRuntime().list_containers({LABEL_PROJECT: PROJECT})
    except GpuciError:
        return set()
    return {c.id for c in listed}


def socket_for(config: Config) -> Path:
    """The control socket of the daemon that supervises ``config``'s agents."""
    from gpuci_tui.core.config.paths import socket_path
    from gpuci_tui.core.errors import GpuciError

    try:
        return socket_path(daemon_instance(config))
    except GpuciError as exc:  # an unusable runtime directory
        raise CliExit(exitcodes.CONFIG, str(exc)) from None


def fail(exc: CliExit) -> int:
    """Print the message of ``exc`` and return its code."""
    print(f"gpuci-tui: {exc.message}", file=sys.stderr)
    return exc.code


def no_daemon(exc: Exception) -> int:
    """Print why the daemon did not answer (a `ControlError`) and return NO_DAEMON."""
    print(f"gpuci-tui: {exc}", file=sys.stderr)
    return exitcodes.NO_DAEMON


def print_result(result: CommandResult) -> int:
    """Print the daemon's answer to a command (a refusal to stderr) and return its code."""
    if not result.ok:
        print(f"gpuci-tui: {result.message}", file=sys.stderr)
        return exitcodes.FAILED
    print(result.message)
    return exitcodes.OK
