"""The output follower: each tracked container's facts reach the engine, once, and no more.

Against the in-process runtime (its agents print the real agent's lines): the
facts of a followed container arrive as `AgentSaid` in the order printed; a
container no longer tracked is let go; one followed to its end is not read again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from gpuci_tui.core.engine.agent.output import JobCompleted, Listening, RunningJob
from gpuci_tui.core.engine.agent.steps import AgentSaid
from gpuci_tui.core.engine.lifecycle import Lane
from gpuci_tui.core.engine.steps import Observation
from gpuci_tui.core.host.observers.output import OutputFollower
from gpuci_tui.core.protocols import ContainerSpec
from gpuci_tui.sim.runtime import DEFAULT_IMAGE
from tests.core.supervisor_env import PAT, Env, make_env, wait_until


@pytest.fixture
def env() -> Iterator[Env]:
    e = make_env()
    yield e
    e.runtime.close()


def agent_spec(env: Env, name: str) -> ContainerSpec:
    environment = {
        "AZP_URL": env.config.azure.url,
        "AZP_POOL": "gpu",
        "AZP_AGENT_NAME": name,
        "AZP_TOKEN_FILE": "/run/azp/token",
    }
    return ContainerSpec(name=name, image=DEFAULT_IMAGE, labels={}, environment=environment)


def following(env: Env) -> tuple[OutputFollower, list[Observation]]:
    """A follower bound to this loop, and the facts it delivers."""
    seen: list[Observation] = []
    follower = OutputFollower(env.runtime, clock=time.time)
    follower.bind(asyncio.get_running_loop(), seen.append)
    return follower, seen


async def test_a_followed_container_says_its_facts_in_order_and_once(env: Env) -> None:
    follower, seen = following(env)
    info = env.runtime.start(agent_spec(env, "t-0"), PAT)
    follower.track([(0, Lane.A, info.id)])
    follower.track([(0, Lane.A, info.id)])  # again: still one follower
    env.org.queue_job(env.pool_id, duration=0.2)
    await wait_until(
        lambda: any(isinstance(o, AgentSaid) and isinstance(o.fact, JobCompleted) for o in seen),
        what="the job's completed line",
    )
    await wait_until(lambda: not env.runtime.container(info.id).running, what="the exit")  # type: ignore[union-attr]
    follower.track([(0, Lane.A, info.id)])  # followed to its end: not read again
    await asyncio.sleep(0.3)
    facts = [type(o.fact) for o in seen if isinstance(o, AgentSaid)]
    assert facts == [Listening, RunningJob, JobCompleted]
    assert all(o.container_id == info.id and o.lane is Lane.A for o in seen)  # type: ignore[union-attr]
    follower.stop()


async def test_a_container_let_go_says_nothing_more(env: Env) -> None:
    follower, seen = following(env)
    info = env.runtime.start(agent_spec(env, "t-1"), PAT)
    follower.track([(1, Lane.A, info.id)])
    await wait_until(lambda: len(seen) == 1, what="online")
    follower.track([])
    assert follower.followed == frozenset()
    env.org.queue_job(env.pool_id, duration=0.2)
    await wait_until(lambda: not env.runtime.container(info.id).running, what="the job")  # type: ignore[union-attr]
    await asyncio.sleep(0.3)
    assert len(seen) == 1
