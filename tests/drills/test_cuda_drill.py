"""CUDA drill (issue 20 §4): the real daemon on Docker, the fake NVML, a driver that changes.

The agent image says it needs CUDA 12.4 (``NVIDIA_REQUIRE_CUDA``, as nvidia/cuda's
images do). The daemon starts on a 535 driver (CUDA 12.2): its slots are held
before any container starts, with the fix, and nothing crash-loops or parks.
The driver is upgraded under the running daemon (the fake NVML's state file):
the slots start and serve a job. It is rolled back: the slots are held again,
the job that runs finishes, the queued one waits; back to 550, it is served.
``check-config`` reports the image as an error with the fix.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config.loader import save_config
from gpuci_tui.core.docker.agentspec import LABEL_INSTANCE
from tests.core.conftest import build_fake_nvml
from tests.core.nvml_helpers import NvmlState
from tests.fixture_images import derived_image
from tests.real.rig import Rig, SlotSampler, assert_jobs_clean, make_rig, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.daemon, pytest.mark.nvml]

LAUNCHER = "tests.drills.gpu_daemon"
GPU = "gpu NVIDIA_H100_80GB_HBM3 GPU-00000000 0 0 0 81559 35 70000 700000 0\n"
D535 = "driver 535.104.05\ncuda 12020\ncuda_v2 12020\n" + GPU
D550 = "driver 550.54.15\ncuda 12040\ncuda_v2 12040\n" + GPU
NEEDS = "image needs CUDA 12.4 (NVIDIA_REQUIRE_CUDA); driver 535.104.05 supports up to CUDA 12.2"
FIX = "or upgrade the driver to 550 or newer"


@pytest.fixture(scope="module")
def nvml_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fake_nvml(tmp_path_factory.mktemp("drill-nvml"))


@pytest.fixture(scope="module")
def cuda_image(docker_client: Any, emulator_image: str) -> str:
    """The emulator image, declaring CUDA 12.4 like nvidia/cuda:12.4 (built locally, no pull)."""
    return derived_image(
        docker_client,
        emulator_image,
        "gpuci-fixture/agent-cuda:12.4",
        ["ENV NVIDIA_REQUIRE_CUDA=cuda>=12.4", "ENV CUDA_VERSION=12.4.1"],
    )


def _one_gpu_slot(
    tmp_path: Path, docker_client: Any, image: str, nvml_lib: Path
) -> Iterator[tuple[Rig, NvmlState]]:
    """One slot with ``gpus = "all"`` on ``image``, the fake driver at 535."""
    for rig in make_rig(tmp_path, docker_client, image, count=1, agents={"gpus": "all"}):
        state = NvmlState(tmp_path / "nvml.state")
        state.write(D535)
        rig.env.update(LD_LIBRARY_PATH=str(nvml_lib.parent), FAKE_NVML_STATE=str(state.path))
        yield rig, state


@pytest.fixture
def rig(
    tmp_path: Path, docker_client: Any, cuda_image: str, nvml_lib: Path
) -> Iterator[tuple[Rig, NvmlState]]:
    yield from _one_gpu_slot(tmp_path, docker_client, cuda_image, nvml_lib)


def held(rig: Rig) -> bool:
    slot = rig.slot(0)
    return slot["state"] == "held" and slot["gate_code"] == "cuda_incompatible"


def no_start_while_held(rig: Rig, seconds: float, job: int | None = None) -> None:
    """A lasting state: held, no new container, nothing parked or backing off, the job waits."""
    before = rig.container_ids()
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        assert held(rig), rig.slot(0)
        assert rig.container_ids() <= before, "a container started on a refused image"
        if job is not None:
            assert rig.org.job(job).agent_name is None, "a job was handed to a refused image"
        time.sleep(0.1)  # the pace of a lasting state's checks, not a wait


def test_a_driver_too_old_for_the_image_holds_the_slot_with_the_fix(
    rig: tuple[Rig, NvmlState], docker_client: Any
) -> None:
    rig_, nvml = rig
    checked = rig_.cli("check-config")
    assert checked.returncode != 0, checked.stdout
    assert NEEDS in checked.stderr and FIX in checked.stderr, checked.stderr
    assert "agents.image" in checked.stderr
    # run: starts, and holds the slot before any container starts.
    rig_.start_daemon(LAUNCHER)
    wait_for(lambda: held(rig_), 15, "the slot held at start")
    all_ever = docker_client.containers.list(
        all=True, sparse=True, filters={"label": f"{LABEL_INSTANCE}={rig_.instance}"}
    )
    assert all_ever == [], "a container was created for a refused image"
    no_start_while_held(rig_, 3.0)
    slot = rig_.slot(0)
    assert slot["gate_reason"].startswith(NEEDS) and slot["gate_reason"].endswith(FIX), slot
    assert slot["message"] == f"held: {slot['gate_reason']}"
    status = rig_.cli("status").stdout
    assert "held" in status and "image needs CUDA 12.4" in status, status
    assert NEEDS in rig_.daemon_log(), "the daemon's log says it too"
    # The driver is upgraded under the running daemon: the slot starts and serves.
    nvml.write(D550)
    wait_for(rig_.all_idle, 60, "the slot serving after the upgrade")
    with SlotSampler(rig_.client, rig_.instance) as sampler:
        first = rig_.org.queue_job(rig_.pool_id, duration=4.0)
        wait_for(lambda: rig_.org.job(first).agent_name, 30, "the first job assigned")
        # Rolled back while the job runs: the job finishes, the next one waits.
        nvml.write(D535)
        wait_for(lambda: rig_.slot(0)["gate_code"] == "cuda_incompatible", 10, "held again")
        second = rig_.org.queue_job(rig_.pool_id, duration=0.5)
        wait_for(lambda: rig_.org.job(first).result, 30, "the first job to end")
        assert rig_.org.job(first).result == "succeeded", "the running job is never touched"
        wait_for(lambda: held(rig_), 20, "held and settled")
        no_start_while_held(rig_, 4.0, job=second)
        # Back to 550: the queued job is served.
        nvml.write(D550)
        wait_for(lambda: rig_.org.job(second).result, 40, "the second job served")
        sampler.assert_no_duplicates()
    assert_jobs_clean(rig_.org, [first, second])
    snap = rig_.status()
    assert snap is not None
    assert all(s["state"] != "parked" for s in snap["slots"])


def test_check_config_passes_when_the_driver_runs_the_image(rig: tuple[Rig, NvmlState]) -> None:
    rig_, nvml = rig
    nvml.write(D550)
    checked = rig_.cli("check-config")
    assert checked.returncode == 0, checked.stderr
    assert "image needs" not in checked.stderr


@pytest.fixture
def plain_rig(
    tmp_path: Path, docker_client: Any, emulator_image: str, nvml_lib: Path
) -> Iterator[tuple[Rig, NvmlState]]:
    """One GPU slot on the emulator image (no CUDA requirement), the driver at 535."""
    yield from _one_gpu_slot(tmp_path, docker_client, emulator_image, nvml_lib)


def test_a_reload_to_an_image_the_driver_cannot_run_is_refused_before_any_start(
    plain_rig: tuple[Rig, NvmlState], cuda_image: str
) -> None:
    rig, _ = plain_rig
    rig.start_daemon(LAUNCHER)
    wait_for(rig.all_idle, 60, "idle agents and their standby")
    before = rig.container_ids()
    old_image = rig.config.agents.image
    save_config(replace(rig.config, agents=replace(rig.config.agents, image=cuda_image)),
                rig.config_path)  # fmt: skip
    preview = rig.cli("reload", "--dry-run")
    assert NEEDS in preview.stdout and FIX in preview.stdout, (preview.stdout, preview.stderr)
    assert f"not applied, its slots keep {old_image}" in preview.stdout
    answer = rig.cli("reload")
    assert answer.returncode != 0, answer.stdout
    assert NEEDS in answer.stdout + answer.stderr
    # Nothing changed, lastingly: the same containers on the old image, the slot serving
    # (not held), the daemon's configuration still the old image, no roll-out.
    until = time.monotonic() + 3.0
    while time.monotonic() < until:
        assert rig.container_ids() == before, "a container changed after a refused reload"
        assert rig.slot(0)["state"] == "idle", rig.slot(0)
        time.sleep(0.1)  # the pace of a lasting state's checks, not a wait
    snap = rig.status()
    assert snap is not None and snap["slots"][0]["image"] == old_image, snap["slots"][0]
    assert not snap.get("rollouts"), snap.get("rollouts")
    job = rig.org.queue_job(rig.pool_id, duration=0.5)
    wait_for(lambda: rig.org.job(job).result, 30, "a job served on the old image")
    assert_jobs_clean(rig.org, [job])
    assert NEEDS in rig.daemon_log()
