"""The supervisor's world on virtual time: the simulated organisation, `VirtualRuntime`.

The counterpart of tests/core/supervisor_env.py for the tests of the supervisor's
rules: the same organisation, pool, PAT and two-slot configuration, but every clock is
the loop's (`VirtualTimeLoop.clock`) and the agents are tasks on it, so a test's
seconds are virtual and it runs the same on a busy machine as on an idle one.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, replace
from typing import Any, overload

from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.org import SimOrg
from tests.core.supervisor_env import BROKEN, PAT, Env, StaticTokens, make_env
from tests.core.virtual_runtime import VirtualRuntime
from tests.virtual_time import VirtualTimeLoop, run_virtual


@dataclass
class VirtualEnv(Env):
    """`Env` on ``loop``'s virtual time."""

    loop: VirtualTimeLoop | None = None

    def supervisor(self, **overrides: object) -> Supervisor:
        """A supervisor of this world, on its clock."""
        config = self.config
        if overrides:
            config = replace(config, agents=replace(config.agents, **overrides))  # type: ignore[arg-type]
        return Supervisor(
            config, api=self.api, runtime=self.runtime, tokens=StaticTokens(), clock=self.clock
        )

    def clock(self) -> float:
        """This world's wall clock (the loop's virtual time)."""
        assert self.loop is not None
        return self.loop.clock()


def make_virtual_env(loop: VirtualTimeLoop) -> VirtualEnv:
    """`make_env`'s world (organisation, pool, two slots, no standby) on ``loop``."""
    base = make_env()
    org = SimOrg(heartbeat_timeout=3.0, clock=loop.clock)
    org.add_pat(PAT)
    pool_id = org.add_pool("gpu")
    runtime = VirtualRuntime(org, loop, broken_images=(BROKEN,), destroy_delay=0.05)
    return VirtualEnv(org, pool_id, runtime, SimPoolApi(org, PAT), base.config, loop)


VirtualTest = Callable[..., Coroutine[Any, Any, None]]


@overload
def on_virtual_time(test: VirtualTest) -> Callable[..., None]: ...
@overload
def on_virtual_time(
    *, supervised: bool = False
) -> Callable[[VirtualTest], Callable[..., None]]: ...
def on_virtual_time(
    test: VirtualTest | None = None, *, supervised: bool = False
) -> Callable[..., None] | Callable[[VirtualTest], Callable[..., None]]:
    """Run ``async def test(env, *fixtures)`` on a fresh `VirtualTimeLoop` with its world.

    The test gets `make_virtual_env`'s world as its first argument (``supervised``: the
    pair of it and its supervisor, running for the test), and pytest's fixtures for the
    others; every container left is killed at the end.
    """
    if test is None:
        return functools.partial(on_virtual_time, supervised=supervised)
    params = list(inspect.signature(test, follow_wrapped=False).parameters.values())[1:]

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        async def main(loop: VirtualTimeLoop) -> None:
            env = make_virtual_env(loop)
            try:
                if supervised:
                    async with running(env.supervisor()) as sup:
                        await test(_Running(env, sup), *args, **kwargs)
                else:
                    await test(env, *args, **kwargs)
            finally:
                env.runtime.close()

        run_virtual(main)

    del run.__wrapped__  # pytest reads the signature set below, not the test's
    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return run


class _Running(tuple[VirtualEnv, Supervisor]):
    """(env, supervisor), as the threaded tests' ``running`` fixture gave them."""

    def __new__(cls, env: VirtualEnv, sup: Supervisor) -> _Running:
        return super().__new__(cls, (env, sup))


@contextlib.asynccontextmanager
async def running(supervisor: Supervisor, stop_within: float = 10) -> AsyncIterator[Supervisor]:
    """``supervisor`` running for the block, then stopped (within ``stop_within`` s)."""
    task = asyncio.create_task(supervisor.run())
    try:
        yield supervisor
    finally:
        supervisor.request_stop()
        await asyncio.wait_for(task, stop_within)
