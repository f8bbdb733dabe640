"""What a shaped slot holds, for the supervisor's gates and the GPU panel.

A slot's container gets `agentspec.slot_gpus`; its gates watch the physical GPUs
NVML samples, which for a MIG slot is the parent GPU (`config.slot_shapes`).
"""

from __future__ import annotations

from gpuci_tui.core.config.loader import Config
from gpuci_tui.core.config.slot_shapes import shaped_slot
from gpuci_tui.core.docker.agentspec import slot_gpus


def watched_gpus(config: Config, slot: int) -> str | tuple[str, ...]:
    """The physical GPUs whose health and other users gate ``slot``.

    The slot's own GPUs, except for a MIG slot: NVML samples the parent GPU, so
    its parent is watched (a fault there holds every slice of it).
    """
    shaped = shaped_slot(config.agents, slot)
    return shaped.watch if shaped is not None else slot_gpus(config, slot)


def watched_ids(config: Config, slot: int) -> tuple[str, ...]:
    """`watched_gpus` as a tuple (``("all",)`` for every GPU)."""
    gpus = watched_gpus(config, slot)
    return (gpus,) if isinstance(gpus, str) else gpus


def device_label(config: Config, slot: int) -> str:
    """How the GPU panel names a shaped slot's devices (``GPU 0+3``, ``MIG 1g.10gb 0/3``).

    Empty for a slot whose GPUs the configuration names by itself.
    """
    shaped = shaped_slot(config.agents, slot)
    return shaped.label if shaped is not None else ""


__all__ = ["device_label", "watched_gpus", "watched_ids"]
