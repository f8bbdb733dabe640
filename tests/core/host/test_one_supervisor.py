"""One supervisor per pool, whatever starts it: ``run``, ``console --foreground``, the demo.

Every mode supervises through `open_assembly`, which takes the instance's lock;
``--foreground`` attaches to a daemon that already answers instead of starting
a second supervisor, and refuses (naming the holder) while the lock is held
without a daemon to attach to. The GPU faults are kept in the instance's file
whichever mode latched them.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gpuci_tui.cli import console_cmd, run_cmd
from gpuci_tui.core.config.loader import Config, daemon_instance, load_config
from gpuci_tui.core.gpu_readings import GpuFrame, GpuHealthReading, GpuHostInfo, GpuSample, XidEvent
from gpuci_tui.core.host.assemble import open_assembly
from gpuci_tui.core.host.control.client import SocketHandle
from gpuci_tui.core.host.daemon import serve
from gpuci_tui.core.host.handle import Supervised, SupervisorHandle
from gpuci_tui.core.host.instance import AlreadyRunningError, DaemonPaths, lock_instance
from gpuci_tui.core.models import SlotState
from gpuci_tui.demo import build_demo
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.runtime import DEFAULT_IMAGE, SimulatedRuntime
from tests.core.supervisor_env import PAT, StaticTokens, wait_until
from tests.waiting import wait_until_async

CONFIG = f"""
[azure]
url = "http://127.0.0.1:9/one"
pool = "gpu"

[agents]
image = "{DEFAULT_IMAGE}"
name_prefix = "one"
count = 1
gpus = "none"

[supervisor]
poll_interval = 0.5

[gpu]
sample_interval = 0.1
"""


class Sampler:
    """Two GPUs; GPU 1 reports an Xid 79 (fell off the bus) while ``xid`` is set."""

    def __init__(self, xid: bool) -> None:
        self.xid = xid

    def host_info(self) -> GpuHostInfo:
        return GpuHostInfo(True, gpu_count=2)

    def sample(self) -> GpuFrame:
        now = time.time()
        gpus = tuple(
            GpuSample(
                i,
                "H100",
                uuid=f"GPU-{i}",
                health=GpuHealthReading(
                    xid_events=(XidEvent(79, now),) if self.xid and i == 1 else ()
                ),
            )
            for i in range(2)
        )
        return GpuFrame(now, GpuHostInfo(True, gpu_count=2), gpus)

    def close(self) -> None:
        pass


@pytest.fixture
def org() -> SimOrg:
    org = SimOrg(heartbeat_timeout=3.0)
    org.add_pat(PAT)
    org.add_pool("gpu")
    return org


@pytest.fixture
def config(tmp_path: Path) -> Config:
    (tmp_path / "config.toml").write_text(CONFIG)
    return load_config(tmp_path / "config.toml")


@pytest.fixture
def services(org: SimOrg, monkeypatch: pytest.MonkeyPatch) -> tuple[SimPoolApi, SimulatedRuntime]:
    """The simulated organisation and engine behind the CLI's `real_services`."""
    api, runtime = SimPoolApi(org, PAT), SimulatedRuntime(org, destroy_delay=0.05)
    monkeypatch.setattr(
        run_cmd, "real_services", lambda cfg, tokens=None: (api, runtime, StaticTokens())
    )
    return api, runtime


@pytest.fixture
async def in_process() -> AsyncIterator[None]:
    """Whatever the console started in this process is stopped, and its lock released."""
    try:
        yield
    finally:
        await console_cmd.close_in_process()


async def idle(handle: SupervisorHandle) -> None:
    async def one_idle() -> bool:
        return [s.state for s in (await handle.snapshot()).slots] == [SlotState.IDLE]

    await wait_until_async(one_idle, 20, "one idle slot")


async def test_foreground_attaches_to_the_daemon_instead_of_a_second_supervisor(
    config: Config, services: tuple[SimPoolApi, SimulatedRuntime], in_process: None
) -> None:
    api, runtime = services
    up = asyncio.Event()
    held: list[Supervised] = []

    def ready(sup: Supervised, server: object) -> None:
        held.append(sup)
        up.set()

    daemon = asyncio.create_task(
        serve(
            config,
            api=api,
            runtime=runtime,
            tokens=StaticTokens(),
            paths=DaemonPaths.for_instance(daemon_instance(config)),
            ready=ready,
        )
    )
    try:
        await asyncio.wait_for(up.wait(), 20)
        await wait_until(
            lambda: [s.state for s in held[0].snapshot().slots] == [SlotState.IDLE],
            timeout=20,
            what="the daemon's idle slot",
        )
        notices: list[str] = []
        handle = await console_cmd.foreground_supervisor(config, None, None, notices.append)
        try:
            assert isinstance(handle, SocketHandle)
            assert (await handle.snapshot()).mode == "daemon"
            assert notices == [console_cmd.ATTACHED_NOTICE]
            assert "attached to it instead of starting a second supervisor" in notices[0]
            assert console_cmd._IN_PROCESS == [], "no in-process supervisor was started"
            # No second supervisor came to adopt the daemon's agents.
            adopted = [e for e in held[0].events if "adopted" in e.message]
            assert adopted == []
        finally:
            await handle.close()
    finally:
        if held:
            held[0].request_stop()
        assert await asyncio.wait_for(daemon, 20) == 0


async def test_foreground_refuses_while_the_lock_is_held_and_no_daemon_answers(
    config: Config, services: tuple[SimPoolApi, SimulatedRuntime], in_process: None
) -> None:
    # A daemon that holds its lock but does not answer yet (still starting).
    locks = lock_instance(config, DaemonPaths.for_instance(daemon_instance(config)))
    try:
        notices: list[str] = []
        with pytest.raises(AlreadyRunningError) as refused:
            await console_cmd.foreground_supervisor(config, None, None, notices.append)
        message = str(refused.value)
        assert "not starting a second supervisor" in message
        assert f"pid {os.getpid()}" in message and "already supervises" in message
        assert notices == [] and console_cmd._IN_PROCESS == []
    finally:
        locks.release()


async def test_a_second_in_process_supervisor_of_the_same_instance_refuses(
    config: Config, services: tuple[SimPoolApi, SimulatedRuntime], in_process: None
) -> None:
    api, runtime = services
    first = console_cmd.in_process_supervisor(config)
    await idle(first)
    with pytest.raises(AlreadyRunningError, match="already supervises"):
        console_cmd.in_process_supervisor(config)
    # Nor may `gpuci-tui run` start beside it.
    with pytest.raises(AlreadyRunningError, match="already supervises"):
        await serve(
            config,
            api=api,
            runtime=runtime,
            tokens=StaticTokens(),
            paths=DaemonPaths.for_instance(daemon_instance(config)),
        )
    assert len(console_cmd._IN_PROCESS) == 1
    # Once the first has stopped, its lock is free again.
    await console_cmd.close_in_process()
    again = console_cmd.in_process_supervisor(config)
    await idle(again)


async def test_a_gpu_quarantined_by_one_in_process_run_stays_quarantined_in_the_next(
    config: Config, services: tuple[SimPoolApi, SimulatedRuntime], in_process: None
) -> None:
    first = console_cmd.in_process_supervisor(config, gpu=Sampler(xid=True))

    async def gates(handle: SupervisorHandle) -> list[str]:
        return [g.state for g in (await handle.snapshot()).gpu_gates]

    async def quarantined(handle: SupervisorHandle) -> bool:
        return await gates(handle) == ["ok", "quarantined"]

    await wait_until_async(lambda: quarantined(first), 20, "GPU 1 quarantined")
    await console_cmd.close_in_process()
    # The next run's GPUs are healthy now: the latched fault is what keeps GPU 1 out.
    again = console_cmd.in_process_supervisor(config, gpu=Sampler(xid=False))
    await wait_until_async(lambda: quarantined(again), 20, "GPU 1 still quarantined")
    assert DaemonPaths.for_instance(daemon_instance(config)).gpu_health.exists()


async def test_the_demo_locks_its_own_instance_in_its_own_directory() -> None:
    env = build_demo(agents=1, jobs_per_minute=0.1, seed=1, startup=(0.0, 0.0))
    try:
        start = env.services().start_supervisor
        assert start is not None
        await start(env.config)
        assert env.assembly is not None
        assert env.workdir in env.paths.lock.parents, "never a real instance's lock"
        with pytest.raises(AlreadyRunningError):
            await start(env.config)
    finally:
        if env.assembly is not None:
            await env.assembly.close()
        env.close()


async def test_open_assembly_releases_the_lock_when_closed(
    config: Config, services: tuple[SimPoolApi, SimulatedRuntime]
) -> None:
    api, runtime = services
    paths = DaemonPaths.for_instance(daemon_instance(config))
    parts = open_assembly(
        config, paths=paths, api=api, runtime=runtime, tokens=StaticTokens(), mode="in-process"
    )
    parts.start()
    try:
        with pytest.raises(AlreadyRunningError):
            lock_instance(config, paths)
    finally:
        await parts.close()
    lock_instance(config, paths).release()


async def test_a_second_foreground_console_is_told_to_quit_the_first_not_to_ask_a_daemon(
    config: Config, services: tuple[SimPoolApi, SimulatedRuntime], in_process: None
) -> None:
    first = console_cmd.in_process_supervisor(config)
    await idle(first)
    notices: list[str] = []
    with pytest.raises(AlreadyRunningError) as refused:
        await console_cmd.foreground_supervisor(config, None, None, notices.append)
    message = str(refused.value)
    assert f"a gpuci-tui console with --foreground (pid {os.getpid()})" in message
    assert "Quit that console first" in message
    # Neither a daemon's remedies nor "still starting": nothing of the kind is running.
    assert "gpuci-tui status" not in message and "still be starting" not in message
    assert refused.value.holder_mode == "in-process" and notices == []
