"""Two hosts' daemons in one pool: a prune on one never touches the other's agents, online or not."""

from __future__ import annotations

import asyncio

import pytest

from gpuci_tui.core.command_types import Prune, Scale
from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config
from gpuci_tui.core.docker import agentspec
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.engine.stale import MARKER_HOST, MARKER_INSTANCE
from gpuci_tui.core.host.observers.stale_watch import own_instances
from gpuci_tui.core.host.supervision import group_stale
from gpuci_tui.core.host.supervision.group_supervisor import GroupSupervisor
from gpuci_tui.core.models import SlotState
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.runtime import DEFAULT_IMAGE, SimulatedRuntime
from tests.core.supervisor_env import PAT, StaticTokens, wait_until


def config(prefix: str, count: int) -> Config:
    return Config(
        azure=AzureConfig(url="http://127.0.0.1:9", pool="gpu"),
        agents=AgentsConfig(
            count=count, image=DEFAULT_IMAGE, name_prefix=prefix, gpus="none", standby=False
        ),
        supervisor=SupervisorConfig(poll_interval=0.5),
    )


def as_host(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """This process is host ``name`` (the marker its agents carry and its daemon checks)."""
    monkeypatch.setattr(agentspec, "host_marker", lambda: name)
    monkeypatch.setattr(group_stale, "host_marker", lambda: name)


def status(org: SimOrg, name: str) -> str | None:
    agent = org.find_agent(name)
    return None if agent is None else agent.status


async def test_a_prune_on_one_host_never_touches_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    org = SimOrg(heartbeat_timeout=600.0)
    org.add_pat(PAT)
    org.add_pool("gpu")
    api = SimPoolApi(org, PAT)
    runtime = SimulatedRuntime(org, destroy_delay=0.05)

    # Host A runs two agents, scales to one: alpha-1 is left offline; then A's daemon
    # stops and leaves alpha-0 running (online).
    as_host(monkeypatch, "host-a")
    alpha = GroupSupervisor(config("alpha", 2), api=api, runtime=runtime, tokens=StaticTokens())
    task = asyncio.create_task(alpha.run())
    try:
        await wait_until(
            lambda: [s.state for s in alpha.snapshot().slots] == [SlotState.IDLE] * 2,
            what="host A's two idle agents",
        )
        assert (await alpha.execute(Scale(1))).ok
        await wait_until(lambda: status(org, "alpha-1") == "offline", what="alpha-1 offline")
    finally:
        alpha.request_stop()
        await asyncio.wait_for(task, 10)
    assert status(org, "alpha-0") == "online"
    left = org.find_agent("alpha-1")
    assert left is not None and left.capabilities[MARKER_HOST] == "host-a"

    # Host B, same pool, with a leftover of its own.
    as_host(monkeypatch, "host-b")
    beta_config = config("beta", 1)
    (beta_instance,) = own_instances(beta_config, "gpu")
    mark = {MARKER_INSTANCE: beta_instance, MARKER_HOST: "host-b"}
    org.register("gpu", "beta-9", PAT, "b9", capabilities=mark, open_session=False)
    beta = GroupSupervisor(beta_config, api=api, runtime=runtime, tokens=StaticTokens())
    task = asyncio.create_task(beta.run())
    try:
        await wait_until(
            lambda: [s.state for s in beta.snapshot().slots] == [SlotState.IDLE],
            what="host B's agent",
        )
        dry = await beta.execute(Prune(dry_run=True))
        assert dry.ok and [line.split()[0] for line in dry.message.splitlines()[1:]] == ["beta-9"]
        result = await beta.execute(Prune())
        assert result.ok and result.message == "removed 1 stale registration", result.message
    finally:
        beta.request_stop()
        await asyncio.wait_for(task, 10)
        for c in runtime.list_containers({}):
            runtime.remove(c.id)
    pool = org.pools()[0].id
    assert {a.name for a in org.agents(pool)} == {"alpha-0", "alpha-1", "beta-0"}
