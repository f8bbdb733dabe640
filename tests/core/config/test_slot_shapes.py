"""Slot shapes: N GPUs per slot kept on NVLink, one slot per MIG device (pure tables)."""

from __future__ import annotations

import pytest

from gpuci_tui.core.config.slot_shapes import (
    HostTopology,
    MigDevice,
    ShapeError,
    gpu_slots,
    group_gpus,
    mig_slots,
    profile_of,
)


def topo(n: int, nvlinks: tuple[tuple[int, int], ...] = (), **levels: int) -> HostTopology:
    """``n`` GPUs across sockets unless ``levels`` says ``l0_1=10`` (pair 0-1 on one switch)."""
    pairs = {(a, b): 50 for a in range(n) for b in range(a + 1, n)}
    for key, level in levels.items():
        a, b = (int(x) for x in key[1:].split("_"))
        pairs[(a, b)] = level
    return HostTopology(
        gpus=tuple(range(n)),
        uuids={i: f"GPU-{i:08d}" for i in range(n)},
        nvlinks=frozenset(nvlinks),
        levels=pairs,
    )


@pytest.mark.parametrize(
    ("topology", "count", "per_slot", "want"),
    [
        # NVLink pairs 0-2 and 1-3 (a cross-wired board): each pair stays together.
        (topo(4, ((0, 2), (1, 3))), 2, 2, ((0, 2), (1, 3))),
        # NVLink pairs 0-3 and 1-2.
        (topo(4, ((0, 3), (1, 2))), 2, 2, ((0, 3), (1, 2))),
        # No NVLink: the closest common ancestor wins (0-1 on one switch, 2-3 on another).
        (topo(4, l0_2=10, l1_3=10), 2, 2, ((0, 2), (1, 3))),
        # NVLink beats a shared PCIe switch.
        (topo(4, ((0, 3),), l0_1=10), 1, 2, ((0, 3),)),
        # Nothing known: lowest indexes first.
        (topo(4), 2, 2, ((0, 1), (2, 3))),
        # A 4-GPU slot on an 8-GPU host with two NVLink cliques {0,2,4,6} and {1,3,5,7}.
        (
            topo(
                8,
                tuple((a, b) for a in (0, 2, 4, 6) for b in (0, 2, 4, 6) if a < b)
                + tuple((a, b) for a in (1, 3, 5, 7) for b in (1, 3, 5, 7) if a < b),
            ),
            2,
            4,
            ((0, 2, 4, 6), (1, 3, 5, 7)),
        ),  # fmt: skip
        # Fewer slots than fit: the rest stay free.
        (topo(6, ((4, 5),)), 1, 2, ((0, 1),)),
        # One GPU per slot is the plain per-agent shape.
        (topo(3), 3, 1, ((0,), (1,), (2,))),
    ],
)
def test_groups_keep_nvlink_and_nearest_gpus_together(
    topology: HostTopology, count: int, per_slot: int, want: tuple[tuple[int, ...], ...]
) -> None:
    assert group_gpus(topology, count, per_slot) == want


def test_the_same_hardware_gives_the_same_slots_every_time() -> None:
    # A restarted supervisor plans again: the same slot must keep the same GPUs.
    topology = topo(8, ((0, 5), (1, 4), (2, 7), (3, 6)))
    first = gpu_slots(topology, 4, 2)
    again = gpu_slots(
        HostTopology(
            gpus=tuple(reversed(topology.gpus)),
            uuids=dict(reversed(list(topology.uuids.items()))),
            nvlinks=topology.nvlinks,
            levels=dict(reversed(list(topology.levels.items()))),
        ),
        4,
        2,
    )
    assert first == again
    assert [s.watch for s in first] == [("0", "5"), ("1", "4"), ("2", "7"), ("3", "6")]
    assert first[0].ids == ("GPU-00000000", "GPU-00000005")
    assert first[0].label == "GPU 0+5"


@pytest.mark.parametrize(
    ("gpus", "count", "per_slot", "message"),
    [
        (4, 3, 2, "3 slots of 2 GPUs need 6 GPUs, but there are 4 GPUs; lower count to 2 or gpus_per_slot"),
        (1, 1, 2, "a slot of 2 GPUs needs 2 GPUs, but there is 1 GPU; lower gpus_per_slot"),
    ],
)  # fmt: skip
def test_too_few_gpus_says_how_many_fit(gpus: int, count: int, per_slot: int, message: str) -> None:
    with pytest.raises(ShapeError) as info:
        gpu_slots(topo(gpus), count, per_slot)
    assert str(info.value) == message


def test_a_per_agent_list_limits_the_gpus_and_names_them_by_index_or_uuid() -> None:
    topology = topo(6, ((2, 5),))
    slots = gpu_slots(topology, 1, 2, ids=("2", "3", "GPU-00000005"))
    assert [s.watch for s in slots] == [("2", "5")]
    with pytest.raises(ShapeError, match="GPU 9 is not a GPU of this host"):
        gpu_slots(topology, 1, 2, ids=("9", "2"))


def _mig(parent: int, index: int, profile: str = "1g.10gb") -> MigDevice:
    return MigDevice(parent, index, f"MIG-{parent}{index}aaaaaa-bbbb", profile, 9856)


def test_one_slot_per_mig_device_by_parent_then_index() -> None:
    topology = HostTopology(
        gpus=(0, 1), mig_mode=frozenset({0, 1}), mig=(_mig(1, 0, "3g.40gb"), _mig(0, 1), _mig(0, 0))
    )
    slots = mig_slots(topology, 3)
    assert [s.ids for s in slots] == [
        ("MIG-00aaaaaa-bbbb",),
        ("MIG-01aaaaaa-bbbb",),
        ("MIG-10aaaaaa-bbbb",),
    ]
    assert [s.watch for s in slots] == [("0",), ("0",), ("1",)]
    assert [s.label for s in slots] == ["MIG 1g.10gb 0/0", "MIG 1g.10gb 0/1", "MIG 3g.40gb 1/0"]
    assert mig_slots(topology, 1)[0].mig == _mig(0, 0)


def test_mig_count_is_limited_by_the_mig_devices() -> None:
    topology = HostTopology(gpus=(0,), mig_mode=frozenset({0}), mig=(_mig(0, 0), _mig(0, 1)))
    with pytest.raises(
        ShapeError, match="count is 3, but this host has 2 MIG devices; lower count to 2"
    ):
        mig_slots(topology, 3)
    with pytest.raises(ShapeError, match="no GPU of this host has any"):
        mig_slots(HostTopology(gpus=(0,)), 1)


@pytest.mark.parametrize(
    ("name", "profile"),
    [
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "1g.10gb"),
        ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", "3g.20gb"),
        ("NVIDIA H100 80GB HBM3", None),
        (None, None),
    ],
)
def test_profile_from_the_mig_device_name(name: str | None, profile: str | None) -> None:
    assert profile_of(name) == profile
