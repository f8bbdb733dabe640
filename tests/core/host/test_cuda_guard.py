"""The CUDA check in process: the simulated runtime's image, a driver that changes, the real engine.

The `CudaGuard` is given the driver as the GPU watch would (one `GpuHostInfo` per
frame) and reads the image from the simulated runtime, whose image
configuration a test can change under the running supervisor.

On virtual time (tests/core/virtual_env.py) but for the assembled test, which runs the
whole assembly (its GPU watch's thread, the real clock) against the threaded runtime.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from gpuci_tui.core.config.loader import load_config
from gpuci_tui.core.engine.gpu_admission import CUDA_INCOMPATIBLE
from gpuci_tui.core.engine.steps import CudaChecked, Observation
from gpuci_tui.core.gpu_readings import GpuFrame, GpuHostInfo, GpuSample
from gpuci_tui.core.host.assemble import assemble
from gpuci_tui.core.host.gpus.cuda_guard import CudaGuard
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.core.models import SlotState
from gpuci_tui.core.protocols import ImageConfig
from gpuci_tui.core.store.history import JobHistory
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.records import AgentStartup
from gpuci_tui.sim.runtime import SimulatedRuntime
from tests.core.supervisor_env import PAT, Env, StaticTokens, wait_until
from tests.core.virtual_env import VirtualEnv, on_virtual_time

NEEDS_124 = ImageConfig("sha256:124", {"NVIDIA_REQUIRE_CUDA": "cuda>=12.4"}, {})
NEEDS_122 = ImageConfig("sha256:122", {"NVIDIA_REQUIRE_CUDA": "cuda>=12.2"}, {})
D535 = GpuHostInfo(True, driver_version="535.104.05", cuda_driver_version=(12, 2), gpu_count=2)
D550 = GpuHostInfo(True, driver_version="550.54.15", cuda_driver_version=(12, 4), gpu_count=2)
NO_NVML = GpuHostInfo(False, reason="NVML library (libnvidia-ml.so.1) not found")


Guarded = tuple[Env, Supervisor, CudaGuard]


def guarded(test: Callable[[Guarded], Awaitable[None]]) -> Callable[..., None]:
    """Run ``test((env, supervisor, guard))`` on virtual time.

    Two GPU slots with a standby; the image needs CUDA 12.4; the guard checks it at once.
    """

    @on_virtual_time
    @functools.wraps(test)
    async def run(env: VirtualEnv) -> None:
        assert env.loop is not None
        env.org.startup = AgentStartup(register=0.2, session=0.1)
        agents = replace(env.config.agents, standby=True, gpus="per-agent")
        config = replace(env.config, agents=agents)
        env.runtime.image_configs[config.agents.image] = NEEDS_124
        sup = Supervisor(
            config, api=env.api, runtime=env.runtime, tokens=StaticTokens(), clock=env.clock
        )
        guard = CudaGuard(
            lambda: [sup], env.runtime.image_config, recheck=0.0, clock=env.loop.time,
            wall=env.clock,
        )  # fmt: skip
        try:
            await test((env, sup, guard))
        finally:
            sup.request_stop()

    return run


def held(sup: Supervisor) -> bool:
    return all(
        s.state is SlotState.HELD and s.gate_code == CUDA_INCOMPATIBLE for s in sup.snapshot().slots
    )


def steady(sup: Supervisor) -> bool:
    return all(s.state is SlotState.IDLE and s.standby == "ready" for s in sup.snapshot().slots)


async def nothing_starts(env: Env, sup: Supervisor, seconds: float) -> None:
    """No container starts for ``seconds`` while the slots stay held (a lasting state)."""
    before = len(env.runtime.history())
    loop = asyncio.get_running_loop()
    until = loop.time() + seconds
    while loop.time() < until:
        assert len(env.runtime.history()) == before, "a container started on a refused image"
        assert held(sup)
        await asyncio.sleep(0.05)  # the pace of the checks over the window, not a wait


@guarded
async def test_refused_at_start_nothing_starts_then_a_new_driver_releases_it(
    guarded: Guarded,
) -> None:
    env, sup, guard = guarded
    await guard.at_start(lambda: D535)
    task = asyncio.create_task(sup.run())
    await wait_until(lambda: held(sup), timeout=5, what="both slots held")
    await nothing_starts(env, sup, 1.5)
    slot = sup.snapshot().slots[0]
    assert slot.gate_reason.startswith(
        "image needs CUDA 12.4 (NVIDIA_REQUIRE_CUDA); driver 535.104.05 supports up to CUDA 12.2: "
    )
    assert slot.gate_reason.endswith("or upgrade the driver to 550 or newer")
    assert slot.message == f"held: {slot.gate_reason}"
    assert not any(s.state in (SlotState.PARKED, SlotState.BACKOFF) for s in sup.snapshot().slots)
    assert [e.kind for e in sup.events].count(CUDA_INCOMPATIBLE) == 1
    # The same driver again: no news. The upgrade: released at once, jobs run.
    await guard.observe(D535)
    await guard.observe(D550)
    await wait_until(lambda: steady(sup), timeout=20, what="both slots serving")
    job = env.org.queue_job(env.pool_id, duration=0.2)
    await wait_until(lambda: env.org.job(job).result == "succeeded", timeout=10, what="the job")
    assert "cuda_compatible" in [e.kind for e in sup.events]
    sup.request_stop()
    await asyncio.wait_for(task, 10)


@guarded
async def test_a_rollback_holds_without_touching_the_running_job_and_a_new_image_releases(
    guarded: Guarded,
) -> None:
    env, sup, guard = guarded
    await guard.at_start(lambda: D550)
    task = asyncio.create_task(sup.run())
    await wait_until(lambda: steady(sup), timeout=20, what="both slots serving")
    job = env.org.queue_job(env.pool_id, duration=1.5)
    await wait_until(lambda: env.org.job(job).agent_name is not None, timeout=10, what="assigned")
    running = {c.id for c in env.runtime.list_containers({}) if c.status == "running"}
    await guard.observe(D535)  # the driver rolled back under the running daemon
    await wait_until(lambda: env.org.job(job).result, timeout=10, what="the job to end")
    assert env.org.job(job).result == "succeeded", "a running job is never touched"
    await wait_until(lambda: held(sup), timeout=10, what="both slots held, the job over")
    alive = {c.id for c in env.runtime.list_containers({}) if c.status == "running"}
    assert alive <= running, "no container started after the rollback"
    await nothing_starts(env, sup, 1.0)
    queued = env.org.queue_job(env.pool_id, duration=0.2)
    # The operator retags an image the driver runs: the next look releases the slots.
    env.runtime.image_configs[sup.config.agents.image] = NEEDS_122
    await guard.observe(D535)
    await wait_until(lambda: env.org.job(queued).result == "succeeded", timeout=20, what="job")
    assert not any(s.state is SlotState.PARKED for s in sup.snapshot().slots)
    sup.request_stop()
    await asyncio.wait_for(task, 10)


@pytest.mark.parametrize(
    ("image", "host", "gpus"),
    [
        (ImageConfig("sha256:x", {}, {}), D535, "per-agent"),  # declares nothing
        (NEEDS_124, NO_NVML, "per-agent"),  # no NVML on this host
        (NEEDS_124, D535, "none"),  # no GPU in its containers
        (
            ImageConfig("sha256:d", {**NEEDS_124.env, "NVIDIA_DISABLE_REQUIRE": "1"}, {}),
            D535,
            "per-agent",
        ),
    ],
)
@on_virtual_time
async def test_never_held(
    env: VirtualEnv, image: ImageConfig, host: GpuHostInfo, gpus: str
) -> None:
    config = replace(env.config, agents=replace(env.config.agents, gpus=gpus))
    env.runtime.image_configs[config.agents.image] = image
    sup = env.supervisor(gpus=gpus)
    assert env.loop is not None
    guard = CudaGuard(lambda: [sup], env.runtime.image_config, clock=env.loop.time, wall=env.clock)
    await guard.at_start(lambda: host)
    task = asyncio.create_task(sup.run())
    await wait_until(
        lambda: all(s.state is SlotState.IDLE for s in sup.snapshot().slots), timeout=10
    )
    assert CUDA_INCOMPATIBLE not in [e.kind for e in sup.events]
    sup.request_stop()
    await asyncio.wait_for(task, 10)


@guarded
async def test_docker_down_keeps_the_last_answer(guarded: Guarded) -> None:
    env, sup, guard = guarded
    await guard.at_start(lambda: D535)
    assert sup.state.cuda.closed
    task = asyncio.create_task(sup.run())
    said: list[object] = []
    deliver = sup.deliver

    def record(obs: Observation) -> None:
        said.append(obs)
        deliver(obs)

    sup.deliver = record  # type: ignore[method-assign]
    env.runtime.available = False
    await guard.observe(D550)  # cannot read the image now: nothing is said
    assert not any(isinstance(o, CudaChecked) for o in said) and sup.state.cuda.closed
    env.runtime.available = True
    await guard.observe(D550)
    await wait_until(lambda: not sup.state.cuda.closed, timeout=5, what="released")
    sup.request_stop()
    await asyncio.wait_for(task, 10)


@guarded
async def test_at_start_folds_in_even_what_a_frame_said_first(guarded: Guarded) -> None:
    """The GPU watch's first frame may reach the guard before `at_start`: its answer only
    goes to the inbox, which the first plan does not read; `at_start` folds it in anyway."""
    env, sup, guard = guarded
    await guard.observe(D535)
    assert not sup.state.cuda.closed, "delivered, not yet folded in"
    await guard.at_start(lambda: D535)
    assert sup.state.cuda.closed and sup.state.cuda.code == CUDA_INCOMPATIBLE


GROUPS = """
[azure]
url = "http://127.0.0.1:9"
pool = "gpu"

[agents]
image = "agent:cuda12.2"
name_prefix = "box"
count = 1
standby = false

[supervisor]
poll_interval = 0.3

[gpu]
sample_interval = 0.1

[groups.old]
count = 1
image = "agent:cuda12.2"
gpus = ["0"]

[groups.new]
count = 1
image = "agent:cuda12.4"
gpus = ["1"]
"""


class Driver:
    """Two GPUs on a driver a test can change between two samples."""

    def __init__(self, host: GpuHostInfo) -> None:
        self.host = host

    def host_info(self) -> GpuHostInfo:
        return self.host

    def sample(self) -> GpuFrame:
        gpus = tuple(GpuSample(i, "H100", uuid=f"GPU-{i}") for i in range(2))
        return GpuFrame(time.time(), self.host, gpus)


async def test_assembled_only_the_group_the_driver_cannot_run_is_held(tmp_path: Path) -> None:
    """The whole assembly (GPU watch, guard, groups): the other group runs jobs meanwhile."""
    org = SimOrg(heartbeat_timeout=3.0)
    org.add_pat(PAT)
    pool = org.add_pool("gpu")
    runtime = SimulatedRuntime(org, images=("agent:cuda12.2", "agent:cuda12.4"))
    runtime.image_configs["agent:cuda12.2"] = NEEDS_122
    runtime.image_configs["agent:cuda12.4"] = NEEDS_124
    path = tmp_path / "config.toml"
    path.write_text(GROUPS)
    driver = Driver(D535)
    parts = assemble(
        load_config(path),
        api=SimPoolApi(org, PAT),
        runtime=runtime,
        tokens=StaticTokens(),
        history=JobHistory(":memory:"),
        mode="in-process",
        gpu=driver,
    )
    parts.start()
    sup = parts.supervisor

    def states() -> dict[str, SlotState]:
        return {s.group: s.state for s in sup.snapshot().slots}

    try:
        await wait_until(
            lambda: states() == {"old": SlotState.IDLE, "new": SlotState.HELD}, timeout=20
        )
        assert not any(c.image == "agent:cuda12.4" for c in runtime.history())
        job = org.queue_job(pool, duration=0.2)
        await wait_until(lambda: org.job(job).result == "succeeded", timeout=10, what="job")
        assert (org.job(job).agent_name or "").startswith("box-old")
        driver.host = D550  # upgraded: the next frame releases the group
        await wait_until(
            lambda: states() == {"old": SlotState.IDLE, "new": SlotState.IDLE}, timeout=20
        )
    finally:
        await parts.close()


@guarded
async def test_a_driver_lost_for_a_while_keeps_the_hold(guarded: Guarded) -> None:
    """A reload: NVML reads nothing until the sampler starts it again; the slots stay held."""
    env, sup, guard = guarded
    await guard.at_start(lambda: D535)
    task = asyncio.create_task(sup.run())
    await wait_until(lambda: held(sup), timeout=5, what="held")
    await guard.observe(NO_NVML)
    await nothing_starts(env, sup, 0.5)
    await guard.observe(D550)
    await wait_until(lambda: steady(sup), timeout=20, what="released by the new driver")
    sup.request_stop()
    await asyncio.wait_for(task, 10)


async def test_images_are_looked_at_again_only_when_due_or_asked(env: Env) -> None:
    env.runtime.image_configs[env.config.agents.image] = NEEDS_124
    config = replace(env.config, agents=replace(env.config.agents, gpus="all"))
    sup = Supervisor(config, api=env.api, runtime=env.runtime, tokens=StaticTokens())
    looked: list[str] = []

    def inspect(image: str) -> ImageConfig | None:
        looked.append(image)
        return env.runtime.image_config(image)

    now = [0.0]
    guard = CudaGuard(lambda: [sup], inspect, recheck=10.0, clock=lambda: now[0])
    await guard.at_start(lambda: D535)
    await guard.observe(D535)
    now[0] = 9.0
    await guard.observe(D535)
    assert len(looked) == 1, "the same driver, not yet due: no inspect"
    guard.check_soon()
    await guard.observe(D535)
    now[0] = 19.5
    await guard.observe(D535)
    await guard.observe(D550)  # another driver: at once
    assert len(looked) == 4


@guarded
async def test_refusal_now_answers_for_an_image_not_yet_run_on_the_driver_read_last(
    guarded: Guarded,
) -> None:
    env, sup, guard = guarded
    other = replace(sup.config, agents=replace(sup.config.agents, image="repo/x:cu122"))
    assert guard.refusal_now(sup.config) == ""  # no driver read yet: cannot tell
    env.runtime.image_configs["repo/x:cu122"] = NEEDS_122
    await guard.at_start(lambda: D535)
    words = guard.refusal_now(sup.config)
    assert words.startswith("image needs CUDA 12.4") and "upgrade the driver" in words, words
    assert guard.refusal_now(other) == ""
    no_gpus = replace(sup.config, agents=replace(sup.config.agents, gpus="none"))
    assert guard.refusal_now(no_gpus) == ""
    await guard.observe(D550)
    assert guard.refusal_now(sup.config) == ""
