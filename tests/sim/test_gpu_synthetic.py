"""SyntheticSampler (demo) and FixtureSampler (UI tests)."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import mean

import pytest

from gpuci_tui.core.gpu_readings import GpuFrame, GpuHostInfo, GpuProcess, GpuSample
from gpuci_tui.core.protocols import GpuSampler
from gpuci_tui.sim.gpu_synthetic import (
    MODELS,
    FixtureSampler,
    GpuModel,
    SyntheticSampler,
    save_frames,
)

CID = "ab" * 32


def run(sampler: SyntheticSampler, steps: int) -> list[GpuFrame]:
    return [sampler.sample() for _ in range(steps)]


def test_same_seed_same_numbers() -> None:
    a = run(SyntheticSampler(4, seed=7, clock=lambda: 0.0), 20)
    b = run(SyntheticSampler(4, seed=7, clock=lambda: 0.0), 20)
    c = run(SyntheticSampler(4, seed=8, clock=lambda: 0.0), 20)
    assert a == b
    assert a != c


def test_host_facts_and_board_names() -> None:
    sampler: GpuSampler = SyntheticSampler(4, seed=1)
    host = sampler.host_info()
    assert host.available
    assert host.driver_version == "580.82.07"
    assert host.cuda_driver_version == (13, 0)
    assert host.gpu_count == 4
    frame = sampler.sample()
    assert [g.index for g in frame.gpus] == [0, 1, 2, 3]
    assert {g.name for g in frame.gpus} == {"NVIDIA RTX A6000"}
    assert {g.memory_total_mib for g in frame.gpus} == {49140.0}
    assert {g.power_limit_w for g in frame.gpus} == {300.0}
    assert len({g.uuid for g in frame.gpus}) == 4
    sampler.close()


def test_other_models_and_custom_model() -> None:
    assert SyntheticSampler(1, model="h100").sample().gpus[0].name == "NVIDIA H100 80GB HBM3"
    custom = GpuModel("NVIDIA Test Board", 1000.0, 100.0, 10.0)
    gpu = SyntheticSampler(1, model=custom).sample().gpus[0]
    assert (gpu.name, gpu.memory_total_mib, gpu.power_limit_w) == (
        "NVIDIA Test Board",
        1000.0,
        100.0,
    )
    assert set(MODELS) >= {"a6000", "l40s", "l4", "a100", "h100"}


def test_no_gpus_is_a_host_without_gpus() -> None:
    sampler = SyntheticSampler(0)
    assert not sampler.host_info().available
    frame = sampler.sample()
    assert frame.gpus == ()
    assert not frame.host.available


def test_busy_gpus_work_hard_idle_ones_rest() -> None:
    owners = {0: (CID, "gpu-host-1")}
    sampler = SyntheticSampler(
        3, seed=3, busy=lambda i: i == 0, owner=owners.get, clock=lambda: 0.0
    )
    frames = run(sampler, 40)[10:]  # after the ramp-up
    busy = [f.gpus[0] for f in frames]
    idle = [f.gpus[1] for f in frames] + [f.gpus[2] for f in frames]
    assert mean(g.utilization_pct for g in busy) > 70
    assert mean(g.utilization_pct for g in idle) < 3
    assert min(g.memory_used_mib for g in busy) > 0.3 * 49140
    assert max(g.memory_used_mib for g in idle) < 50
    assert mean(g.temperature_c for g in busy) > mean(g.temperature_c for g in idle) + 10
    assert mean(g.power_w for g in busy) > 3 * mean(g.power_w for g in idle)
    # The busy GPU shows the job's process, tied to its container.
    proc = busy[-1].processes[0]
    assert proc.container_id == CID
    assert proc.container_name == "gpu-host-1"
    assert proc.used_memory_mib and proc.used_memory_mib > 0.3 * 49140
    assert all(g.processes == () for g in idle)


def test_gpu_cools_down_when_the_job_ends() -> None:
    state = {"busy": True}
    sampler = SyntheticSampler(1, seed=5, busy=lambda i: state["busy"])
    run(sampler, 30)
    state["busy"] = False
    after = run(sampler, 15)[-1].gpus[0]
    assert after.utilization_pct is not None and after.utilization_pct < 5
    assert after.memory_used_mib is not None and after.memory_used_mib < 50
    assert after.processes == ()


def test_values_stay_in_physical_bounds() -> None:
    flip = {"n": 0}

    def busy(i: int) -> bool:
        flip["n"] += 1
        return (flip["n"] // 37 + i) % 2 == 0

    for frame in run(SyntheticSampler(4, seed=11, busy=busy, model="l4"), 400):
        for g in frame.gpus:
            assert 0 <= g.utilization_pct <= 100
            assert 0 <= g.memory_used_mib <= g.memory_total_mib
            assert 0 <= g.power_w <= g.power_limit_w
            assert 20 <= g.temperature_c <= 95


def test_a_failing_busy_callback_means_idle() -> None:
    def broken(i: int) -> bool:
        raise RuntimeError("supervisor gone")

    gpu = run(SyntheticSampler(1, seed=1, busy=broken), 5)[-1].gpus[0]
    assert gpu.utilization_pct is not None and gpu.utilization_pct < 5


# --------------------------------------------------------------------------- FixtureSampler


def frame(t: float, util: float, *, available: bool = True) -> GpuFrame:
    host = GpuHostInfo(
        available=available,
        driver_version="550.54.15",
        cuda_driver_version=(12, 4),
        gpu_count=1 if available else 0,
    )
    gpus = (
        (
            GpuSample(
                index=0,
                name="NVIDIA L4",
                uuid="GPU-1",
                utilization_pct=util,
                memory_used_mib=100.0,
                memory_total_mib=23034.0,
                temperature_c=40.0,
                power_w=20.5,
                power_limit_w=72.0,
                processes=(
                    GpuProcess(
                        pid=7,
                        used_memory_mib=None,
                        name="python3",
                        container_id=CID,
                        container_name="gpu-host-2",
                    ),
                ),
            ),
        )
        if available
        else ()
    )
    return GpuFrame(taken_at=t, host=host, gpus=gpus)


def test_fixture_replays_in_order_then_holds_last() -> None:
    frames = [frame(1.0, 10.0), frame(2.0, 20.0), frame(3.0, 30.0)]
    sampler = FixtureSampler(frames)
    assert [sampler.sample().taken_at for _ in range(5)] == [1.0, 2.0, 3.0, 3.0, 3.0]
    assert sampler.samples_taken == 5


def test_fixture_can_cycle() -> None:
    sampler = FixtureSampler([frame(1.0, 10.0), frame(2.0, 20.0)], cycle=True)
    assert [sampler.sample().taken_at for _ in range(5)] == [1.0, 2.0, 1.0, 2.0, 1.0]


def test_fixture_host_info_follows_the_next_frame() -> None:
    sampler = FixtureSampler([frame(1.0, 0.0, available=False), frame(2.0, 5.0)])
    assert not sampler.host_info().available
    sampler.sample()
    assert sampler.host_info().available


def test_fixture_without_frames() -> None:
    sampler = FixtureSampler([])
    assert not sampler.host_info().available
    assert sampler.sample().gpus == ()


def test_json_round_trip(tmp_path: Path) -> None:
    frames = [frame(1.0, 10.0), frame(2.0, 99.0), frame(3.0, 0.0, available=False)]
    path = tmp_path / "frames.json"
    save_frames(frames, path)
    loaded = FixtureSampler.from_json(path)
    assert [loaded.sample() for _ in range(3)] == frames


def test_json_plain_list_and_synthetic_recording(tmp_path: Path) -> None:
    recorded = run(SyntheticSampler(2, seed=2, busy=lambda i: True), 3)
    path = tmp_path / "frames.json"
    save_frames(recorded, path)
    data = json.loads(path.read_text())
    path.write_text(json.dumps(data["frames"]))  # the plain-list form
    assert [FixtureSampler.from_json(path).sample() for _ in range(1)] == recorded[:1]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "not valid JSON"),
        ('{"frames": 3}', "expected a list"),
        ('[{"taken_at": 1.0}]', "host"),
        ('[{"taken_at": 1.0, "host": {"available": "yes"}}]', "available"),
    ],
)
def test_bad_fixture_files_say_what_is_wrong(tmp_path: Path, content: str, words: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=words):
        FixtureSampler.from_json(path)
