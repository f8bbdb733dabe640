"""The configuration's GPUs against the host's: do they exist, are they free, are they shared.

Checked by ``gpuci-tui run`` and ``check-config`` when NVML answers (without
it nothing is known about the GPUs and nothing is checked):

* a GPU index or UUID the configuration names that NVML does not see is an error;
* two groups naming the same GPU, one by index and one by UUID, is an error;
* a GPU of a group that a process outside gpuci-tui's containers holds is a
  warning naming the process: a job there would share the GPU;
* a group whose image the driver cannot start (`check_images_cuda`) is an error
  for ``check-config`` and a warning for ``run``, which starts and holds that
  group's slots (the other groups run) until the driver or the image changes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from gpuci_tui.core.config.loader import Config, ConfigError, agent_groups
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.formatting import memory
from gpuci_tui.core.gpu.cuda_fit import DriverCuda, need_of, refusal
from gpuci_tui.core.gpu_readings import GpuFrame
from gpuci_tui.core.protocols import ImageConfig


def _index_of(frame: GpuFrame) -> dict[str, int]:
    """Every way to name a GPU (its index as text, its UUID) → its index."""
    names: dict[str, int] = {}
    for gpu in frame.gpus:
        names[str(gpu.index)] = gpu.index
        if gpu.uuid:
            names[gpu.uuid] = gpu.index
    return names


def _group_gpus(config: Config, frame: GpuFrame) -> dict[str, set[int]]:
    """GPU indexes each group uses (unknown names left out: they are reported apart)."""
    index = _index_of(frame)
    used: dict[str, set[int]] = {}
    for group in agent_groups(config):
        agents = group.agents
        if agents.gpus == "all":
            used[group.name] = {gpu.index for gpu in frame.gpus}
        elif agents.gpus in ("none", "mig"):
            # MIG slots' parents are known from the topology at start, not from a frame.
            used[group.name] = set()
        elif agents.gpu_ids:
            need = agents.count * agents.gpus_per_slot
            ids = agents.gpu_ids[:need] if agents.gpus == "per-agent" else agents.gpu_ids
            used[group.name] = {index[i] for i in ids if i in index}
        else:  # per-agent without a list: about the first count x gpus_per_slot (NVLink decides)
            used[group.name] = set(range(agents.count * agents.gpus_per_slot))
    return used


def _key(config: Config, group: str) -> str:
    return "agents.gpus" if not config.groups else f"groups.{group}.gpus"


def check_host_gpus(
    config: Config, frame: GpuFrame, ours: Collection[str] = ()
) -> tuple[list[ConfigError], list[str]]:
    """Problems (errors) and warnings of ``config``'s GPUs on this host.

    Args:
        config: The configuration.
        frame: One NVML sample of the host (its GPUs and their processes).
        ours: Container ids of gpuci-tui's own agents (their processes are not foreign).
    """
    if not frame.host.available:
        return [], []
    index = _index_of(frame)
    seen = ", ".join(str(g.index) for g in frame.gpus) or "none"
    errors: list[ConfigError] = []
    for group in agent_groups(config):
        for gpu_id in group.agents.gpu_ids:
            if gpu_id not in index:
                problem = f"names GPU {gpu_id}, which NVML does not see on this host (GPUs: {seen})"
                errors.append(ConfigError(problem, key=_key(config, group.name)))
    used = _group_gpus(config, frame)
    owner: dict[int, str] = {}
    for name, gpus in used.items():
        for number in sorted(gpus):
            if number in owner and owner[number] != name:
                problem = (
                    f"gives GPU {number} to this group and to group {owner[number]} "
                    "(by index and by UUID); a GPU belongs to one group"
                )
                errors.append(ConfigError(problem, key=_key(config, name)))
            owner.setdefault(number, name)
    warnings = []
    by_index = {gpu.index: gpu for gpu in frame.gpus}
    for gpu_index, name in sorted(owner.items()):
        gpu = by_index.get(gpu_index)
        if gpu is None:
            continue
        for proc in gpu.processes:
            if proc.container_id is not None and proc.container_id in ours:
                continue
            where = (
                f"container {proc.container_name or proc.container_id[:12]}"
                if (proc.container_id)
                else "the host"
            )
            size = f", {memory(proc.used_memory_mib)}" if proc.used_memory_mib else ""
            label = "" if not config.groups else f" (group {name})"
            warnings.append(
                f"GPU {gpu_index}{label} is in use by pid {proc.pid} ({proc.name or '?'}, "
                f"{where}{size}) outside gpuci-tui: jobs on it will share it"
            )
    return errors, warnings


def check_images_cuda(
    config: Config, frame: GpuFrame, inspect: Callable[[str], ImageConfig | None]
) -> list[ConfigError]:
    """One error per group whose image this driver cannot start, with the fix.

    An image Docker does not have, or cannot be asked about now, is not checked
    (the start says so); nor is a group without GPUs.
    """
    if not frame.host.available:
        return []
    driver = DriverCuda(frame.host.driver_version, frame.host.cuda_driver_version)
    errors = []
    for group in agent_groups(config):
        agents = group.agents
        if agents.gpus == "none":
            continue
        try:
            image = inspect(agents.image)
        except GpuciError:
            continue
        if image is None:
            continue
        why = refusal(agents.image, need_of(image.env, image.labels), driver)
        if why is not None:
            key = "agents.image" if not config.groups else f"groups.{group.name}.image"
            errors.append(ConfigError(why, key=key))
    return errors
