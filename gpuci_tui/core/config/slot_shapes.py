"""Slot shapes: which devices each slot gets under ``gpus_per_slot = N`` or ``gpus = "mig"``.

The planner is pure: the host's topology (`HostTopology`, read once from NVML
by `core.gpu.nvml_topology`) and the configured shape in, each slot's devices
out. The same hardware always gives the same answer, so a restarted supervisor
gives a slot the GPUs it had before (nothing is stored).

The topology is the host's, not a configuration's: the daemon installs how to
read it (`use_topology`) and it is read once, the first time a shaped slot asks
(`shaped_slot`). Configurations without a shape never read it.

``gpus_per_slot = N`` hands each slot N distinct GPUs. Multi-GPU jobs (NCCL
tests, tensor-parallel runs) are only fast when their GPUs talk over NVLink, so
the planner keeps GPUs that share NVLink together, and otherwise the GPUs
whose closest common ancestor (NVML's topology level: same board, one PCIe
switch, several switches, host bridge, NUMA node, across sockets) is
nearest. It is greedy: slot 0 starts from the lowest free GPU and adds, one at
a time, the free GPU nearest to those it holds (ties: the lowest index).

``gpus = "mig"`` makes one slot per MIG device (a GPU instance of a parent GPU
in MIG mode), in the order of parent index then MIG index; the container gets
the MIG device's UUID, as NVIDIA's device plugin passes it in
``NVIDIA_VISIBLE_DEVICES``. Admission and health watch the parent GPU: NVML's
per-second frame is per physical GPU, so a fault on the parent, or a foreign
process anywhere on it, holds every slice of that parent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuci_tui.core.wording import plural

if TYPE_CHECKING:
    from gpuci_tui.core.config.file import ConfigError
    from gpuci_tui.core.config.model import AgentsConfig, Config

#: NVML's topology levels (``nvmlGpuTopologyLevel_t``), nearest first.
LEVEL_NAMES: Mapping[int, str] = {
    0: "same board",
    10: "one PCIe switch",
    20: "several PCIe switches",
    30: "one host bridge",
    40: "one NUMA node",
    50: "across sockets",
}
#: The level assumed for a pair NVML said nothing of (farthest: never preferred).
UNKNOWN_LEVEL = 60
#: The score of an NVLink pair: nearer than any PCIe level.
NVLINK = -1


class ShapeError(ValueError):
    """The configured shape does not fit this host's GPUs (the message says why and how to fix)."""


@dataclass(frozen=True)
class MigDevice:
    """One MIG device (a GPU instance with its compute instance) of a parent GPU."""

    parent: int
    """The parent GPU's NVML index."""
    index: int
    """Its index among the parent's MIG devices (``nvmlDeviceGetMigDeviceHandleByIndex``)."""
    uuid: str
    """``MIG-…``: what the container is given."""
    profile: str | None = None
    """The GPU instance profile, e.g. ``1g.10gb`` (None: not read)."""
    memory_mib: int | None = None
    """The slice's own memory."""


@dataclass(frozen=True)
class HostTopology:
    """The GPUs of a host as far as slot shapes go; read once at start."""

    gpus: tuple[int, ...] = ()
    """NVML indexes of the physical GPUs."""
    uuids: Mapping[int, str] = field(default_factory=dict)
    """GPU index → ``GPU-…`` UUID, where read."""
    nvlinks: frozenset[tuple[int, int]] = frozenset()
    """Pairs (lower index first) joined by NVLink."""
    levels: Mapping[tuple[int, int], int] = field(default_factory=dict)
    """Pair (lower index first) → NVML common-ancestor level (see `LEVEL_NAMES`)."""
    mig_mode: frozenset[int] = frozenset()
    """GPUs whose MIG mode is enabled."""
    mig: tuple[MigDevice, ...] = ()
    """Every MIG device, by parent index then MIG index."""


@dataclass(frozen=True)
class SlotDevices:
    """What one slot holds."""

    ids: tuple[str, ...]
    """The devices its container gets (GPU UUIDs or indexes, or one ``MIG-…`` UUID)."""
    watch: tuple[str, ...]
    """The physical GPUs (indexes) that admission and health watch for it."""
    label: str
    """How the GPU panel names it: ``GPU 0+1`` or ``MIG 1g.10gb 0/3``."""
    mig: MigDevice | None = None


def _pair(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


def distance(topology: HostTopology, a: int, b: int) -> int:
    """How far apart two GPUs are: `NVLINK` or their common-ancestor level."""
    key = _pair(a, b)
    if key in topology.nvlinks:
        return NVLINK
    return topology.levels.get(key, UNKNOWN_LEVEL)


def group_gpus(
    topology: HostTopology, count: int, per_slot: int, pool: Sequence[int] | None = None
) -> tuple[tuple[int, ...], ...]:
    """``count`` groups of ``per_slot`` distinct GPUs from ``pool`` (default: every GPU).

    Raises:
        ShapeError: fewer GPUs than ``count`` x ``per_slot``.
    """
    free = sorted(set(topology.gpus if pool is None else pool))
    need = count * per_slot
    if need > len(free):
        have = "is 1 GPU" if len(free) == 1 else f"are {len(free)} GPUs"
        fit = len(free) // per_slot
        fix = f"lower count to {fit} or gpus_per_slot" if fit else "lower gpus_per_slot"
        each = plural(per_slot, "GPU")
        slots = f"{count} slots of {each} need" if count > 1 else f"a slot of {each} needs"
        raise ShapeError(f"{slots} {plural(need, 'GPU')}, but there {have}; {fix}")
    groups: list[tuple[int, ...]] = []
    for _ in range(count):
        held = [free.pop(0)]
        while len(held) < per_slot:
            # The nearest to the farthest GPU held: a set is as fast as its slowest link.
            best = min(free, key=lambda g: (max(distance(topology, g, h) for h in held), g))
            free.remove(best)
            held.append(best)
        groups.append(tuple(sorted(held)))
    return tuple(groups)


def gpu_slots(
    topology: HostTopology, count: int, per_slot: int, ids: Sequence[str] = ()
) -> tuple[SlotDevices, ...]:
    """Each slot's devices under ``gpus = "per-agent"`` and ``gpus_per_slot = per_slot``.

    ``ids`` (from ``gpus = { per_agent = [...] }``) limits the GPUs used; an id
    is an index or a ``GPU-…`` UUID.

    Raises:
        ShapeError: too few GPUs, or an id that names no GPU of this host.
    """
    pool: list[int] | None = None
    if ids:
        by_uuid = {uuid: index for index, uuid in topology.uuids.items()}
        pool = []
        for wanted in ids:
            index = int(wanted) if wanted.isdigit() else by_uuid.get(wanted)
            if index is None or index not in topology.gpus:
                raise ShapeError(f"GPU {wanted} is not a GPU of this host")
            pool.append(index)
    slots = []
    for group in group_gpus(topology, count, per_slot, pool):
        devices = tuple(topology.uuids.get(g, str(g)) for g in group)
        label = "GPU " + "+".join(str(g) for g in group)
        slots.append(SlotDevices(devices, tuple(str(g) for g in group), label))
    return tuple(slots)


def mig_slots(topology: HostTopology, count: int) -> tuple[SlotDevices, ...]:
    """One slot per MIG device, the first ``count`` of them.

    Raises:
        ShapeError: no GPU in MIG mode, or fewer MIG devices than ``count``.
    """
    devices = sorted(topology.mig, key=lambda m: (m.parent, m.index))
    if not devices:
        raise ShapeError(
            'gpus = "mig" needs MIG devices, but no GPU of this host has any; enable MIG mode '
            "and create GPU instances (nvidia-smi mig -cgi ... -C), or use another gpus value"
        )
    if count > len(devices):
        raise ShapeError(
            f"count is {count}, but this host has {len(devices)} MIG device"
            f"{'' if len(devices) == 1 else 's'}; lower count to {len(devices)}"
        )
    return tuple(
        SlotDevices((m.uuid,), (str(m.parent),), mig_label(m), mig=m) for m in devices[:count]
    )


def mig_label(device: MigDevice) -> str:
    """``MIG 1g.10gb 0/3``: profile, then parent GPU / MIG index."""
    return f"MIG {device.profile or '?'} {device.parent}/{device.index}"


def profile_of(name: str | None) -> str | None:
    """The profile in a MIG device's NVML name (``NVIDIA H100 80GB HBM3 MIG 1g.10gb``)."""
    if not name or " MIG " not in f" {name}":
        return None
    tail = f" {name}".rsplit(" MIG ", 1)[1].strip()
    return tail.split()[0] if tail else None


# --------------------------------------------------------------------------- the host's topology

#: The device id of a slot the hardware has no room for: Docker refuses it and admission
#: holds the slot (a GPU job must never run without its GPU).
UNPLACED = "unplaced"

_lock = threading.Lock()
_reader: Callable[[], HostTopology] | None = None
_topology: HostTopology | None = None
#: Plans by shape, for the kept topology: asked per slot at every GPU sample and snapshot.
_plans: dict[tuple[object, ...], tuple[SlotDevices, ...] | ShapeError] = {}


def use_topology(reader: Callable[[], HostTopology] | None) -> None:
    """Read the host's topology with ``reader`` from now on (None: no GPUs known)."""
    global _reader, _topology  # noqa: PLW0603 - the host's hardware is one per process
    with _lock:
        _reader, _topology = reader, None
        _plans.clear()


def host_topology() -> HostTopology:
    """The host's topology, read once; empty when no reader is installed or it reads no GPU."""
    global _topology  # noqa: PLW0603 - read once, kept while the hardware is the same
    with _lock:
        if _topology is None:
            topology = _reader() if _reader is not None else HostTopology()
            if not topology.gpus:
                return topology  # a driver loaded late: read again next time
            _topology = topology
        return _topology


def is_shaped(agents: AgentsConfig) -> bool:
    """Whether the slots' devices depend on the hardware (``gpus_per_slot`` > 1 or MIG)."""
    return agents.gpus == "mig" or (agents.gpus == "per-agent" and agents.gpus_per_slot > 1)


def plan(
    agents: AgentsConfig, topology: HostTopology, *, strict: bool = True
) -> tuple[SlotDevices, ...]:
    """Every slot's devices under ``agents``' shape (`is_shaped` must hold).

    ``strict=False`` plans only the slots that fit: the greedy planner gives the
    first slots the same devices whatever the count, so a count raised past
    what fits leaves the existing slots where they are.

    Raises:
        ShapeError: the shape does not fit ``topology`` (with ``strict=False``: a
            listed GPU is not this host's, or there is no MIG device).
    """
    count = agents.count
    if agents.gpus == "mig":
        if not strict and topology.mig:
            count = min(count, len(topology.mig))
        return mig_slots(topology, count)
    if not strict:
        pool = len(agents.gpu_ids) if agents.gpu_ids else len(topology.gpus)
        count = min(count, pool // agents.gpus_per_slot)
    return gpu_slots(topology, count, agents.gpus_per_slot, agents.gpu_ids)


def shape_problems(config: Config, topology: HostTopology) -> list[ConfigError]:
    """Every shaped group planned on ``topology``: one problem per group that does not fit.

    The one statement of "the shape fits this host": ``run`` refuses to start on it
    (`host.slot_layout`) and ``check-config`` reports it, each under the group's
    ``gpus`` key, with the fix.
    """
    from gpuci_tui.core.config.file import ConfigError  # noqa: PLC0415 - the rules' error
    from gpuci_tui.core.config.model import agent_groups  # noqa: PLC0415 - model is above

    problems = []
    for group in agent_groups(config):
        if not is_shaped(group.agents):
            continue
        where = "agents" if group.implicit else f"groups.{group.name}"
        try:
            plan(group.agents, topology)
        except ShapeError as exc:
            problems.append(ConfigError(str(exc), key=f"{where}.gpus", path=config.path))
    return problems


def shaped_slot(agents: AgentsConfig, slot: int) -> SlotDevices | None:
    """The devices of ``slot`` when the shape depends on the hardware, else None.

    A slot the hardware has no room for (the count was raised past what fits,
    or a GPU is gone) gets `UNPLACED`: its container does not start and its
    gate is held, rather than run a GPU job without a GPU.
    """
    if not is_shaped(agents):
        return None
    topology = host_topology()
    key = (agents.gpus, agents.count, agents.gpus_per_slot, agents.gpu_ids)
    with _lock:
        # Only for the kept topology: one read before the driver answered is not kept.
        planned = _plans.get(key) if topology is _topology else None
    if planned is None:
        try:
            planned = plan(agents, topology, strict=False)
        except ShapeError as exc:
            planned = exc
        with _lock:
            if topology is _topology:
                _plans[key] = planned
    if isinstance(planned, ShapeError):
        return SlotDevices((UNPLACED,), (UNPLACED,), f"unplaced: {planned}")
    slots = planned
    if slot >= len(slots):
        return SlotDevices((UNPLACED,), (UNPLACED,), "unplaced")
    return slots[slot]


__all__ = [
    "UNPLACED",
    "host_topology",
    "is_shaped",
    "plan",
    "shape_problems",
    "shaped_slot",
    "use_topology",
    "LEVEL_NAMES",
    "HostTopology",
    "MigDevice",
    "ShapeError",
    "SlotDevices",
    "distance",
    "group_gpus",
    "gpu_slots",
    "mig_label",
    "mig_slots",
    "profile_of",
]
