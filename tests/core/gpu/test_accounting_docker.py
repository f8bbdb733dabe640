"""Attribution end to end: real containers, real /proc, the real pynvml on the fake library.

Two busybox containers run on the local engine. Their host PIDs (``docker
inspect`` ``State.Pid``) are written into the fake NVML state as GPU
processes; NvmlSampler maps them to container ids through /proc/<pid>/cgroup,
and JobAccountant must count only the container the test maps to a job.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.gpu.accounting import (
    ENERGY_SHARED,
    JobAccountant,
    JobKey,
    foreign_processes,
)
from tests.core.nvml_helpers import NvmlState
from tests.waiting import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.nvml]

GPUS = """
gpu NVIDIA_A100 GPU-00000000-0000-0000-0000-00000000000a 90 40 9000 81920 60 300000 400000 0
gpu NVIDIA_A100 GPU-00000000-0000-0000-0000-00000000000b 50 20 4000 81920 55 200000 400000 0
"""


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 15.0) -> Any:
    """`tests.waiting.wait_until`, in this module's order: what first."""
    return wait_until(probe, timeout, what)


def start(docker_client: Any, image: str, run_label: str, role: str) -> tuple[str, int]:
    """Start a sleeping busybox container; return its id and host PID."""
    container = docker_client.containers.run(
        image,
        ["sleep", "120"],
        detach=True,
        auto_remove=True,
        network_mode="host",
        labels={"gpuci.test": run_label, "gpuci.case": f"accounting-{role}"},
    )

    def pid() -> int:
        container.reload()
        state = container.attrs["State"]
        return int(state["Pid"]) if state.get("Running") else 0

    host_pid = wait_for(f"container {role} to run", pid)
    # The cgroup is set up before the process starts, but check rather than assume.
    wait_for(
        f"/proc/{host_pid}/cgroup to name container {role}",
        lambda: container.id in Path(f"/proc/{host_pid}/cgroup").read_text(),
    )
    return container.id, host_pid


def test_job_container_is_attributed_and_foreign_container_is_not(
    docker_client: Any,
    busybox_image: str,
    run_label: str,
    make_sampler: Callable[..., Any],
    nvml_state: NvmlState,
) -> None:
    ours_id, ours_pid = start(docker_client, busybox_image, run_label, "job")
    other_id, other_pid = start(docker_client, busybox_image, run_label, "foreign")
    job = JobKey(instance="0123456789ab", slot=0, agent="gpuhost-0", request_id=4711)
    owners = {ours_id: job}
    ticks = itertools.count(1000)
    sampler = make_sampler(clock=lambda: float(next(ticks)))
    accountant = JobAccountant(min_interval=1.0)

    def sample(ours_mem: int, ours_sm: int, energy: int, *, foreign_on_0: bool = False) -> Any:
        procs = f"proc 0 {ours_pid} {ours_mem} {ours_sm} 10\nproc 1 {other_pid} 3000 50 20\n"
        if foreign_on_0:
            procs += f"proc 0 {other_pid} 3000 50 20\n"
        nvml_state.write(f"{GPUS}energy 0 {energy}\nenergy 1 123456\n{procs}")
        frame = sampler.sample()
        assert accountant.observe(frame, owners)
        return frame

    first = sample(6000, 60, 10_000_000)
    mapped = {p.pid: p.container_id for g in first.gpus for p in g.processes}
    assert mapped == {ours_pid: ours_id, other_pid: other_id}
    sample(8000, 100, 10_400_000)

    foreign = foreign_processes(first, owners)
    assert list(foreign) == [1]
    assert [(p.pid, p.container_id) for p in foreign[1]] == [(other_pid, other_id)]

    live = accountant.live(job)
    assert live is not None
    assert live.samples == 2
    assert live.gpu_indexes == (0,)
    assert live.peak_memory_mib == 8000  # not 8000 + the foreign 3000
    assert live.mean_util_pct == 80.0
    assert live.peak_util_pct == 100.0
    assert live.energy_j == 400.0
    assert not live.shared
    assert accountant.jobs() == (job,)  # the foreign container never became a job

    # The foreign container now also uses GPU 0: still not counted, but the
    # job's energy is no longer its own.
    third = sample(7000, 40, 10_900_000, foreign_on_0=True)
    assert [p.pid for p in foreign_processes(third, owners)[0]] == [other_pid]
    stats = accountant.finish(job)
    assert stats.samples == 3
    assert stats.peak_memory_mib == 8000
    assert stats.mean_util_pct == pytest.approx((60 + 100 + 40) / 3)
    assert stats.energy_j is None
    assert stats.energy_note == ENERGY_SHARED
    assert stats.shared
