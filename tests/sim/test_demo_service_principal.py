"""``gpuci-tui demo --auth service-principal``: the demo signs in as a service principal of
the simulated tenant, and its agents register with the short-lived access tokens."""

from __future__ import annotations

import asyncio
from typing import Any

from gpuci_tui.demo import DEMO_POOL, build_demo
from gpuci_tui.demo_auth import DEMO_APP
from tests.waiting import wait_until_async


async def test_the_demo_runs_as_a_service_principal() -> None:
    env = build_demo(
        agents=2, jobs_per_minute=0.1, seed=1, startup=(0.0, 0.0), auth="service-principal"
    )
    try:
        assert env.config.azure.auth == "service-principal"
        check = await asyncio.to_thread(env.api.validate_pat, DEMO_POOL)
        assert check.ok, check.message
        start = env.services().start_supervisor
        assert start is not None
        handle = await start(env.config)

        async def two_idle_signed_in() -> Any:
            snap = await handle.snapshot()
            idle = sum(s.state == "idle" for s in snap.slots) == 2
            return snap if idle and snap.azure.identity else None

        snap = await wait_until_async(two_idle_signed_in, 30, "two idle agents, signed in")
        assert snap.azure.identity.startswith(f"service principal {DEMO_APP} · token valid")
        agents = env.org.agents(env.org.pools(DEMO_POOL)[0].id)
        assert len(agents) >= 2
        assert {how for _, how in env.org.entra.sign_ins} == {"secret"}
    finally:
        if env.assembly is not None:
            await env.assembly.close()
        env.close()
