"""`gpuci-tui demo --foreign-agents N`: a crowded pool, and the daemon reads only its own lanes.

End to end over HTTP: the real client against the simulated organisation holding 2,000
agents of other hosts. After the start's one read of the whole pool, every agents list
asks the service for this instance's lanes and gets an answer of a few KB.
"""

from __future__ import annotations

from gpuci_tui.demo import DEMO_POOL, build_demo
from tests.core.supervisor_env import wait_until

AGENTS = "/_apis/distributedtask/pools/{poolId}/agents"


async def test_the_demo_with_other_hosts_agents_reads_only_its_own() -> None:
    env = build_demo(agents=1, jobs_per_minute=0.1, seed=1, startup=(0.0, 0.0), foreign_agents=2000)
    try:
        pool = env.org.pools(DEMO_POOL)[0].id
        assert env.org.pool_size(pool) >= 2000
        start = env.services().start_supervisor
        assert start is not None
        await start(env.config)
        sup = env.supervisor
        assert sup is not None

        def filtered_reads() -> list[int]:
            return [
                e.size
                for e in env.org.request_log()
                if e.route == AGENTS and "demands=GPUCI_INSTANCE" in e.detail
            ]

        await wait_until(lambda: len(filtered_reads()) >= 3, timeout=60, what="filtered reads")
        assert max(filtered_reads()) < 20_000, "our lanes only, not 2,000 agents (~1 MB)"
        summary = sup.snapshot().pool_summary
        assert summary.ours_only and summary.online + summary.offline < 10
        assert sup.snapshot().azure_usage.read_at is not None
    finally:
        if env.assembly is not None:
            await env.assembly.close()
        env.close()
