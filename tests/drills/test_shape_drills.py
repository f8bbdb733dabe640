"""Slot-shape drills: the real daemon on Docker with shaped slots from the fake NVML.

1. MIG: two parents in MIG mode, GPU 0 with two 1g.10gb slices, GPU 1 with one.
   With ``gpus = "mig"`` and three slots, each slot is one slice (the snapshot
   names it), and a critical Xid on parent 0 quarantines both of its slices while
   the slice of GPU 1 goes on taking jobs, until ``gpu clear``.
2. Two GPUs per slot: four GPUs NVLink-joined in pairs 0-2 and 1-3 make slots of
   those pairs; a foreign process on GPU 2 holds slot 0 only, and its exit releases it.

The daemon is `tests.drills.gpu_daemon` (no GPU device request: this engine has no
NVIDIA runtime; `tests/real/test_slot_shapes_gpu_engine.py` checks the MIG UUID
arrives through a real NVIDIA device driver).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.core.conftest import build_fake_nvml
from tests.core.nvml_helpers import NvmlState
from tests.real.rig import Rig, assert_jobs_clean, make_rig, slot_of_agent, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.daemon, pytest.mark.nvml]

LAUNCHER = "tests.drills.gpu_daemon"
MIG = "NVIDIA_H100_80GB_HBM3_MIG_1g.10gb"
GPUS = (
    "driver 580.159.04\ncuda 13000\n"
    + "".join(
        f"gpu NVIDIA_H100_80GB_HBM3 GPU-{i:08d} 0 0 0 81559 35 70000 700000 0\nmig {i} 1 1\n"
        for i in range(2)
    )
    + f"migdev 0 0 MIG-00000000-0000-5000-8000-000000000000 {MIG} 9856\n"
    + f"migdev 0 1 MIG-00000000-0000-5000-8000-000000000001 {MIG} 9856\n"
    + f"migdev 1 0 MIG-00000001-0000-5000-8000-000000000000 {MIG} 9856\n"
)


@pytest.fixture
def mig_rig(
    tmp_path: Path,
    docker_client: Any,
    emulator_image: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Rig, NvmlState]]:
    lib = build_fake_nvml(tmp_path_factory.mktemp("shape-nvml"))
    yield from _run_rig(tmp_path, docker_client, emulator_image, lib, GPUS, 3, {"gpus": "mig"})


def _run_rig(
    tmp_path: Path,
    docker_client: Any,
    image: str,
    lib: Path,
    hardware: str,
    count: int,
    agents: dict[str, Any],
) -> Iterator[tuple[Rig, NvmlState]]:
    for rig in make_rig(tmp_path, docker_client, image, count=count, agents=agents):
        state = NvmlState(tmp_path / "nvml.state")
        state.write(hardware)
        rig.env.update(LD_LIBRARY_PATH=str(lib.parent), FAKE_NVML_STATE=str(state.path))
        yield rig, state


PAIRS = (
    "driver 580.159.04\ncuda 13000\n"
    + "".join(
        f"gpu NVIDIA_H100_80GB_HBM3 GPU-{i:08d} 0 0 0 81559 35 70000 700000 0\n" for i in range(4)
    )
    + "link 0 1 10\nlink 0 2 40 nvlink\nlink 1 3 40 nvlink\nlink 2 3 10\n"
)


@pytest.fixture
def pair_rig(
    tmp_path: Path,
    docker_client: Any,
    emulator_image: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Rig, NvmlState]]:
    lib = build_fake_nvml(tmp_path_factory.mktemp("pair-nvml"))
    agents = {"gpus": "per-agent", "gpus_per_slot": 2}
    yield from _run_rig(tmp_path, docker_client, emulator_image, lib, PAIRS, 2, agents)


def test_two_gpu_slots_keep_nvlink_pairs_and_a_foreign_process_holds_one_slot(
    pair_rig: tuple[Rig, NvmlState],
) -> None:
    rig, state = pair_rig
    rig.start_daemon(LAUNCHER)
    wait_for(rig.all_idle, 90, "two slots idle with ready standbys")
    assert [rig.slot(n)["devices"] for n in range(2)] == ["GPU 0+2", "GPU 1+3"]
    assert [rig.slot(n)["gpus"] for n in range(2)] == [["0", "2"], ["1", "3"]]
    state.write(PAIRS + "proc 2 4242 62500 60 20\n")  # a host process on GPU 2
    wait_for(lambda: rig.slot(0)["gate"] == "held", 10, "slot 0 held")
    assert rig.slot(0)["gate_reason"].startswith("GPU 2 used by pid 4242")
    assert rig.slot(1)["gate"] == "open"
    job = rig.org.queue_job(rig.pool_id, duration=0.5)
    wait_for(lambda: rig.org.job(job).result, 60, "the job on the free pair")
    assert slot_of_agent(rig.org.job(job).agent_name or "") == 1
    state.write(PAIRS)
    wait_for(lambda: rig.slot(0)["gate"] == "open", 10, "slot 0 released")
    assert_jobs_clean(rig.org, [job])


def test_mig_slots_run_jobs_and_a_parent_fault_holds_only_its_slices(
    mig_rig: tuple[Rig, NvmlState],
) -> None:
    rig, state = mig_rig
    rig.start_daemon(LAUNCHER)
    wait_for(rig.all_idle, 90, "three slots idle with ready standbys")
    assert [rig.slot(n)["devices"] for n in range(3)] == [
        "MIG 1g.10gb 0/0",
        "MIG 1g.10gb 0/1",
        "MIG 1g.10gb 1/0",
    ]
    assert [rig.slot(n)["gpus"] for n in range(3)] == [["0"], ["0"], ["1"]]
    state.write(GPUS + "xid 0 1 79\n")  # parent 0 falls off the bus
    for slot in (0, 1):
        wait_for(
            lambda s=slot: rig.slot(s)["gate"] == "quarantined", 10, f"slice {slot} quarantined"
        )
    assert rig.slot(2)["gate"] == "open"
    jobs = [rig.org.queue_job(rig.pool_id, duration=0.5) for _ in range(2)]
    wait_for(
        lambda: all(rig.org.job(j).result for j in jobs), 60, "jobs on the other parent's slice"
    )
    assert {slot_of_agent(rig.org.job(j).agent_name or "") for j in jobs} == {2}
    cleared = rig.cli("gpu", "clear", "0", "--yes")
    assert cleared.returncode == 0, cleared.stderr
    wait_for(lambda: rig.slot(0)["gate"] == rig.slot(1)["gate"] == "open", 10, "released")
    assert_jobs_clean(rig.org, jobs)
