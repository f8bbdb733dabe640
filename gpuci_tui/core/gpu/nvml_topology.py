"""Read the host's GPU topology through NVML once: NVLink pairs, common ancestors, MIG devices.

For the slot shapes (`config.slot_shapes`): which GPUs share NVLink (P2P over
NVLink, ``nvmlDeviceGetP2PStatus`` with the NVLink index: one call per pair
that answers on every board, where ``nvmlDeviceGetNvLinkState`` is NOT
SUPPORTED on a PCIe H100), how near each pair is on the PCIe tree
(``nvmlDeviceGetTopologyCommonAncestor``), and each MIG device of a parent in
MIG mode (``nvmlDeviceGetMaxMigDeviceCount`` slots, of which
``nvmlDeviceGetMigDeviceHandleByIndex`` answers NOT_FOUND for the empty ones).

Any call that fails leaves its fact out (a pair with no level is "far", a GPU
whose MIG mode cannot be read has no slices): a shape then fits less, which
says so at start, rather than put a job on a guessed device.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import pynvml

from gpuci_tui.core.config.slot_shapes import HostTopology, MigDevice, profile_of
from gpuci_tui.core.gpu.nvml_facts import memory_mib, nvml_call
from gpuci_tui.core.protocols import GpuSampler

log = logging.getLogger(__name__)

T = TypeVar("T")


def _call(fn: Callable[..., T], *args: Any) -> T | None:
    return nvml_call(fn, *args, fact="topology fact", logger=log)


def _text(value: object) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _mig_devices(parent: int, handle: Any) -> tuple[MigDevice, ...]:
    slots = _call(pynvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 0
    found = []
    for index in range(int(slots)):
        mig = _call(pynvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, index)
        if mig is None:
            continue  # an empty slot of the parent (NOT_FOUND)
        uuid = _text(_call(pynvml.nvmlDeviceGetUUID, mig))
        if not uuid:
            continue  # a device without a UUID cannot be given to a container
        found.append(
            MigDevice(
                parent=parent,
                index=index,
                uuid=uuid,
                profile=profile_of(_text(_call(pynvml.nvmlDeviceGetName, mig))),
                memory_mib=memory_mib(mig, fact="topology fact", logger=log),
            )
        )
    return tuple(found)


def read_nvml_topology(sampler: GpuSampler) -> HostTopology:
    """The host's topology; empty when NVML is unavailable.

    ``sampler`` is the `NvmlSampler` that initialised NVML (its ``host_info``
    starts NVML on first use).
    """
    host = sampler.host_info()
    if not host.available:
        return HostTopology()
    handles: dict[int, Any] = {}
    for index in range(host.gpu_count):
        handle = _call(pynvml.nvmlDeviceGetHandleByIndex, index)
        if handle is not None:
            handles[index] = handle
    uuids = {i: u for i, h in handles.items() if (u := _text(_call(pynvml.nvmlDeviceGetUUID, h)))}
    nvlinks: set[tuple[int, int]] = set()
    levels: dict[tuple[int, int], int] = {}
    order = sorted(handles)
    for n, a in enumerate(order):
        for b in order[n + 1 :]:
            level = _call(pynvml.nvmlDeviceGetTopologyCommonAncestor, handles[a], handles[b])
            if level is not None:
                levels[(a, b)] = int(level)
            p2p = _call(
                pynvml.nvmlDeviceGetP2PStatus,
                handles[a],
                handles[b],
                pynvml.NVML_P2P_CAPS_INDEX_NVLINK,
            )
            if p2p == pynvml.NVML_P2P_STATUS_OK:
                nvlinks.add((a, b))
    mig_mode: set[int] = set()
    mig: list[MigDevice] = []
    for index in order:
        mode = _call(pynvml.nvmlDeviceGetMigMode, handles[index])
        if mode is not None and int(mode[0]) == 1:
            mig_mode.add(index)
            mig.extend(_mig_devices(index, handles[index]))
    return HostTopology(
        gpus=tuple(order),
        uuids=uuids,
        nvlinks=frozenset(nvlinks),
        levels=levels,
        mig_mode=frozenset(mig_mode),
        mig=tuple(mig),
    )


def topology_reader(sampler: GpuSampler) -> Callable[[], HostTopology]:
    """How to read ``sampler``'s topology: its own ``topology()``, NVML's, or none.

    A sampler of recorded frames knows no topology: its host has no shaped slots.
    """
    own = getattr(sampler, "topology", None)
    if callable(own):
        return lambda: own()
    from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler  # noqa: PLC0415 - the real one

    if isinstance(sampler, NvmlSampler):
        return lambda: read_nvml_topology(sampler)
    return HostTopology


__all__ = ["read_nvml_topology", "topology_reader"]
