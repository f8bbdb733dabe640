"""GPU routing end to end in process: agents advertise their slot's GPUs, demands route jobs.

The in-process supervisor starts agents on the simulated organisation with the
capabilities of a synthetic H100 host; a job demanding an H100 is served, one
demanding an A100 waits, and status says why.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from gpuci_tui.cli.render import render_status
from gpuci_tui.core.gpu.capabilities import HostGpuFacts
from gpuci_tui.core.host.assemble import assemble
from gpuci_tui.core.host.gpus.caps import SlotCapabilities, facts_from_frame, facts_reader
from gpuci_tui.core.store.history import JobHistory
from gpuci_tui.sim.gpu_synthetic import FixtureSampler, SyntheticSampler
from tests.core.supervisor_env import Env, StaticTokens, wait_until
from tests.core.virtual_env import VirtualEnv, on_virtual_time

H100_DEMAND = "gpu.product -equals nvidia-h100-80gb-hbm3"  # the service ignores case
A100 = "NVIDIA-A100-80GB-PCIe"


@on_virtual_time
async def test_a_job_demanding_an_h100_runs_and_one_demanding_an_a100_waits_with_why(
    env: VirtualEnv,
) -> None:
    """On virtual time (tests/core/virtual_env.py)."""
    sup = env.supervisor(gpus="per-agent")
    sampler = SyntheticSampler(2, seed=1, model="h100")
    sup.executor.capabilities = SlotCapabilities(facts_reader(sampler), hostname="gpubox3")
    task = asyncio.create_task(sup.run())
    try:
        await wait_until(
            lambda: sum(a.online for a in env.org.agents(env.pool_id)) == 2, what="2 agents online"
        )
        agents = sorted(env.org.agents(env.pool_id), key=lambda a: a.name)
        for slot, agent in enumerate(agents):
            caps = agent.capabilities
            assert caps["gpu.product"] == "NVIDIA-H100-80GB-HBM3"
            assert caps["gpu.count"] == "1" and caps["gpu.memory"] == "81559"
            assert caps["gpu.family"] == "hopper" and caps["mig.capable"] == "true"
            assert caps["cuda.runtime-version.full"] == "13.0"
            assert caps["gpuci.host"] == "gpubox3"
            # Slot i holds GPU i: its facts, not the host's first GPU's.
            assert agent.name.endswith(str(slot))

        served = env.org.queue_job(
            env.pool_id,
            duration=0.2,
            demands=(H100_DEMAND, "cuda.runtime-version.full -gtVersion 12.4"),
        )
        waiting = env.org.queue_job(
            env.pool_id, duration=0.2, demands=(f"gpu.product -equals {A100}",)
        )
        await wait_until(lambda: env.org.job(served).result == "succeeded", what="the H100 job")
        reason = f"no agent with gpu.product = {A100} (1 job)"
        await wait_until(
            lambda: sup.snapshot().pool_summary.waiting == (reason,),
            what="the waiting job's reason in the snapshot",
        )
        assert env.org.job(waiting).state == "queued"
        assert env.org.matched_agents(env.org.job(waiting)) == []
        assert f"waiting: {reason}" in render_status(sup.snapshot())
    finally:
        sup.request_stop()
        await asyncio.wait_for(task, 10)


def test_the_assembly_gives_every_group_the_capabilities(env: Env, tmp_path: Path) -> None:
    """`assemble` wires the sampler's facts into each group's executor."""
    sampler = SyntheticSampler(2, seed=1, model="h100")
    history = JobHistory(tmp_path / "history.db")
    try:
        assembly = assemble(
            env.config,
            api=env.api,
            runtime=env.runtime,
            tokens=StaticTokens(),
            history=history,
            mode="in-process",
            gpu=sampler,
        )
        (child,) = assembly.supervisor.children.values()
        caps = child.executor.capabilities
        assert caps is not None
        # gpus = "none" in this configuration: only the host is advertised.
        assert set(caps(env.config, 0)) == {"gpuci.host"}
        all_gpus = replace(env.config, agents=replace(env.config.agents, gpus="all"))
        assert caps(all_gpus, 0)["gpu.count"] == "2"
    finally:
        history.close()


def test_a_sampler_without_facts_gives_what_a_frame_says() -> None:
    sampler = SyntheticSampler(1, seed=1, model="l4")
    frame_facts = facts_from_frame(sampler)
    assert isinstance(frame_facts, HostGpuFacts)
    (gpu,) = frame_facts.gpus
    assert gpu.name == "NVIDIA L4" and gpu.memory_total_mib == 23034
    assert gpu.compute_capability is None  # not in a frame: left out, not guessed
    replay = FixtureSampler([sampler.sample()])
    assert facts_reader(replay)().gpus[0].name == "NVIDIA L4"
