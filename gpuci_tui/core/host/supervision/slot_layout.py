"""At start: read the host's topology for shaped slots, and refuse a shape that does not fit.

``gpus_per_slot`` and ``gpus = "mig"`` (`config.slot_shapes`) give each slot
devices that depend on the hardware. The daemon installs how to read the
topology (through its GPU sampler) and plans every shaped group once here, so
a shape the host cannot hold stops the start with a message that says how to
fix it, instead of leaving slots unplaced.
"""

from __future__ import annotations

from gpuci_tui.core.config.file import raise_if_any
from gpuci_tui.core.config.loader import Config, agent_groups
from gpuci_tui.core.config.slot_shapes import (
    HostTopology,
    host_topology,
    is_shaped,
    shape_problems,
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
    use_topology(topology_reader(sampler) if sampler is not None else None)
    if not any(is_shaped(g.agents) for g in agent_groups(config)):
        return
    topology = host_topology() if sampler is not None else HostTopology()
    raise_if_any(shape_problems(config, topology))


__all__ = ["prepare_shapes"]
