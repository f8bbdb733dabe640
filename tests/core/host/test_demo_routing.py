"""The demo shows GPU routing: its H100 agents take the H100 job, the A100 job waits with why."""

from __future__ import annotations

from gpuci_tui.demo import build_demo
from tests.core.supervisor_env import wait_until


async def test_the_demo_serves_the_h100_job_and_says_why_the_a100_job_waits() -> None:
    env = build_demo(agents=1, jobs_per_minute=0.1, seed=1, startup=(0.0, 0.0))
    try:
        start = env.services().start_supervisor
        assert start is not None
        await start(env.config)
        h100, a100 = sorted((j for j in env.org.jobs() if j.demands), key=lambda j: j.request_id)
        assert h100.demands == ("gpu.product -equals NVIDIA-H100-80GB-HBM3",)
        await wait_until(
            lambda: env.org.job(h100.request_id).state != "queued", 20, "the H100 job to start"
        )
        sup = env.supervisor
        assert sup is not None
        reason = "no agent with gpu.product = NVIDIA-A100-80GB-PCIe (1 job)"
        await wait_until(
            lambda: reason in sup.snapshot().pool_summary.waiting, 20, "the A100 job's reason"
        )
        assert env.org.job(a100.request_id).state == "queued"
    finally:
        if env.assembly is not None:
            await env.assembly.close()
        env.close()
