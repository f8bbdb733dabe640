"""At start: read the host's topology for shaped slots, and refuse a shape that does not fit.

``gpus_per_slot`` and ``gpus = "mig"`` (`config.slot_shapes`) give each slot
devices that depend on the hardware. The daemon installs how to read the
topology (through its GPU sampler) and plans every shaped group once here, so
a shape the host cannot hold stops the start with a message that says how to
fix it, instead of leaving slots unplaced.
"""

from __future__ import annotations

from gpuci_tui.core.config.file import ConfigError, ConfigErrors
from gpuci_tui.core.config.loader import Config, agent_groups
from gpuci_tui.core.config.slot_shapes import (
    HostTopology,
    ShapeError,
    host_topology,
    is_shaped,
    plan,
    use_topology,
)
from gpuci_tui.core.gpu.nvml_topology import topology_reader
from gpuci_tui.core.protocols import GpuSampler


def prepare_shapes(config: Config, sampler: GpuSampler | None) -> None:
    """Install the topology reader of ``sampler`` and check every shaped group against it.

    Raises:
        ConfigError: a shaped group does not fit this host's GPUs (`ConfigErrors`
            for several), or there is no GPU sampler to read the topology with.
    """
    groups = [g for g in agent_groups(config) if is_shaped(g.agents)]
    use_topology(topology_reader(sampler) if sampler is not None else None)
    if not groups:
        return
    topology = host_topology() if sampler is not None else HostTopology()
    errors = []
    for group in groups:
        where = "agents" if group.implicit else f"groups.{group.name}"
        try:
            plan(group.agents, topology)
        except ShapeError as exc:
            errors.append(ConfigError(str(exc), key=f"{where}.gpus", path=config.path))
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigErrors(errors)


__all__ = ["prepare_shapes"]
