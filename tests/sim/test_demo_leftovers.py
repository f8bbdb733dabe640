"""The demo's pool holds leftovers: its earlier prefix's are stale, another host's never is.

End to end over HTTP: the real client reads the simulated organisation with
``includeCapabilities``, the agents the demo starts report the marker, and a
prune removes only this host's earlier registrations.
"""

from __future__ import annotations

from gpuci_tui.core.command_types import Prune
from gpuci_tui.core.engine.stale import MARKER_INSTANCE
from gpuci_tui.demo import DEMO_POOL, OLD_PREFIX, build_demo
from gpuci_tui.sim.leftovers import OTHER_HOST
from tests.core.supervisor_env import wait_until


async def test_the_demo_shows_stale_leftovers_and_prunes_only_those() -> None:
    env = build_demo(agents=1, jobs_per_minute=0.1, seed=1, startup=(0.0, 0.0))
    try:
        start = env.services().start_supervisor
        assert start is not None
        handle = await start(env.config)
        sup = env.supervisor
        assert sup is not None
        await wait_until(lambda: len(sup.snapshot().stale) == 2, timeout=20, what="the count")
        stale = sup.snapshot().stale
        assert sorted(s.name for s in stale) == [f"{OLD_PREFIX}-0", f"{OLD_PREFIX}-1"]
        assert [round((s.offline_seconds or 0) / 86400) for s in stale] == [9, 3]
        pool = env.org.pools(DEMO_POOL)[0].id
        await wait_until(
            lambda: any(a.name == "demo-gpu-0" for a in env.org.agents(pool)), what="the lane"
        )
        lane = next(a for a in env.org.agents(pool) if a.name == "demo-gpu-0")
        assert lane.capabilities.get(MARKER_INSTANCE), "the demo's own agents carry the marker"

        result = await handle.send(Prune())
        assert result.ok and result.message == "removed 2 stale registrations", result.message
        names = {a.name for a in env.org.agents(pool)}
        assert f"{OTHER_HOST}-0" in names and not any(n.startswith(OLD_PREFIX) for n in names)
    finally:
        if env.assembly is not None:
            await env.assembly.close()
        env.close()
