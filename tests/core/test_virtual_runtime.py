"""The in-memory Docker on virtual time (tests/core/virtual_runtime.py) against the threaded one.

Its agents must behave as `SimulatedRuntime`'s threads do (the same lines, records,
exit codes, events), only on the loop's clock: the host tests moved onto it keep
their meaning only if it does.
"""

from __future__ import annotations

import asyncio
import re
import threading

from gpuci_tui.core.protocols import ContainerEvent, ContainerSpec
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.records import AgentStartup
from gpuci_tui.sim.runtime import DEFAULT_IMAGE, SimulatedRuntime
from tests.core.supervisor_env import PAT
from tests.core.virtual_runtime import VirtualRuntime
from tests.virtual_time import VirtualTimeLoop, run_virtual
from tests.waiting import wait_until, wait_until_async

LABELS = {"gpuci.instance": "vt"}
STARTUP = AgentStartup(register=2.0, session=1.0)
STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ: ")


def spec(name: str = "vt-0", go_file: str = "") -> ContainerSpec:
    env = {
        "AZP_URL": "http://127.0.0.1:1/simorg",
        "AZP_POOL": "gpu",
        "AZP_AGENT_NAME": name,
        "AZP_TOKEN_FILE": "/run/azp/token",
    }
    if go_file:
        env["AZP_GO_FILE"] = go_file
    return ContainerSpec(name=name, image=DEFAULT_IMAGE, labels=LABELS, environment=env)


def world(org: SimOrg) -> int:
    org.add_pat(PAT)
    org.startup = STARTUP
    return org.add_pool("gpu")


def lines(tail: list[str]) -> list[str]:
    """Output lines without the agent's timestamps and its ids (they differ per run)."""
    return [re.sub(r"\d+", "N", STAMP.sub("", line)) for line in tail]


def threaded_run() -> tuple[list[str], int | None, str | None]:
    org = SimOrg(heartbeat_timeout=3.0, startup=AgentStartup(register=0.2, session=0.1))
    org.add_pat(PAT)
    pool = org.add_pool("gpu")
    runtime = SimulatedRuntime(org)
    try:
        info = runtime.start(spec(), PAT)
        job = org.queue_job(pool, duration=0.3)
        c = runtime.container(info.id)
        assert c is not None
        wait_until(lambda: c.exit_code is not None, timeout=20, what="the threaded agent's exit")
        return lines(c.tail(100)), c.exit_code, org.job(job).result
    finally:
        runtime.close()


def test_an_agent_says_and_does_what_the_threaded_one_does_on_the_loops_clock() -> None:
    async def main(loop: VirtualTimeLoop) -> tuple[list[str], int | None, str | None]:
        org = SimOrg(heartbeat_timeout=3.0, clock=loop.clock)
        pool = world(org)
        runtime = VirtualRuntime(org, loop)
        info = runtime.start(spec(), PAT)
        job = org.queue_job(pool, duration=30.0)
        c = runtime.container(info.id)
        assert c is not None
        await wait_until_async(lambda: c.agent_id is not None, timeout=10, what="registered")
        assert loop.time() >= STARTUP.register, "it registers after its start-up seconds"
        await wait_until_async(lambda: c.exit_code is not None, timeout=60, what="its exit")
        record = org.job(job)
        assert record.assign_time is not None and record.finish_time is not None
        assert record.finish_time - record.assign_time >= 30.0, "the job ran its 30 s"
        assert c.token is None, "the token file is gone after registration"
        return lines(c.tail(100)), c.exit_code, record.result

    assert run_virtual(main) == threaded_run()


def test_stop_blocks_in_virtual_time_like_docker_stop() -> None:
    """Idle: exit 143 at once. Busy: the job runs to its end first, or SIGKILL at the timeout."""

    async def main(loop: VirtualTimeLoop) -> None:
        org = SimOrg(heartbeat_timeout=3.0, clock=loop.clock)
        pool = world(org)
        runtime = VirtualRuntime(org, loop)
        idle = runtime.start(spec("vt-0"), PAT)
        await wait_until_async(lambda: org.find_agent("vt-0") is not None, timeout=10)
        await asyncio.to_thread(runtime.stop, idle.id, 10.0)
        assert runtime.history()[0].exit_code == 143
        busy = runtime.start(spec("vt-1"), PAT)
        job = org.queue_job(pool, duration=8.0)
        await wait_until_async(lambda: org.job(job).state == "running", timeout=10)
        began = loop.time()
        await asyncio.to_thread(runtime.stop, busy.id, 30.0)
        assert org.job(job).result == "succeeded" and runtime.history()[1].exit_code == 0
        assert 0 < loop.time() - began <= 8.0
        late = runtime.start(spec("vt-2"), PAT)
        job = org.queue_job(pool, duration=60.0)
        await wait_until_async(lambda: org.job(job).state == "running", timeout=10)
        began = loop.time()
        await asyncio.to_thread(runtime.stop, late.id, 5.0)
        assert loop.time() - began == 5.0 and runtime.history()[2].exit_code == 137

    run_virtual(main)


def test_events_and_the_go_file_reach_a_consumer_thread_in_order() -> None:
    async def main(loop: VirtualTimeLoop) -> list[tuple[str, float]]:
        org = SimOrg(heartbeat_timeout=3.0, clock=loop.clock)
        world(org)
        runtime = VirtualRuntime(org, loop, destroy_delay=0.5)
        got: list[tuple[str, float]] = []
        stop = threading.Event()

        def consume() -> None:
            for event in runtime.events(LABELS, stop):
                loop.call_soon_threadsafe(got.append, (event.action, loop.time()))

        thread = threading.Thread(target=consume, name="vt-events", daemon=True)
        thread.start()
        try:
            info = runtime.start(spec(go_file="/run/azp/go"), PAT)
            c = runtime.container(info.id)
            assert c is not None
            await wait_until_async(lambda: c.agent_id is not None, timeout=10)
            await asyncio.sleep(100)  # waits at its gate, however long
            assert org.find_agent("vt-0") is not None and not c.jobs
            assert any("waiting for the go file" in line for line in c.tail(10))
            runtime.put_file(info.id, "/run/azp/go", "go\n")
            await wait_until_async(
                lambda: org.find_agent("vt-0").status == "online",  # type: ignore[union-attr]
                timeout=10,
                what="its session, after the go",
            )
            runtime.remove(info.id)
            await asyncio.sleep(1)
        finally:
            stop.set()
            thread.join(5)
        return got

    got = run_virtual(main)
    assert [action for action, _ in got] == ["create", "start", "die", "destroy"]
    assert got[0][1] == got[1][1] == 0.0, "create and start arrive before the clock moves"


def test_a_cut_event_stream_says_so_and_comes_back() -> None:
    async def main(loop: VirtualTimeLoop) -> list[ContainerEvent]:
        org = SimOrg(heartbeat_timeout=3.0, clock=loop.clock)
        world(org)
        runtime = VirtualRuntime(org, loop)
        got: list[ContainerEvent] = []
        stop = threading.Event()

        def consume() -> None:
            for event in runtime.events(LABELS, stop):
                loop.call_soon_threadsafe(got.append, event)

        thread = threading.Thread(target=consume, name="vt-events", daemon=True)
        thread.start()
        try:
            runtime.break_event_stream(5.0)
            runtime.start(spec(), PAT)  # in the gap: Docker does not replay it
            await asyncio.sleep(10)
            runtime.available = False
            await asyncio.sleep(1)
            runtime.available = True
            await asyncio.sleep(1)
        finally:
            stop.set()
            thread.join(5)
        return got

    actions = [e.action for e in run_virtual(main)]
    assert actions == ["stream-lost", "stream-restored", "stream-lost", "stream-restored"]


def test_closing_ends_every_consumer_thread_even_one_never_told_to_stop() -> None:
    """A killed daemon never stops its observers: the runtime's teardown ends their threads."""

    async def main(loop: VirtualTimeLoop) -> threading.Thread:
        org = SimOrg(heartbeat_timeout=3.0, clock=loop.clock)
        world(org)
        runtime = VirtualRuntime(org, loop)
        runtime.start(spec(), PAT)
        never = threading.Event()

        def consume() -> None:
            for _ in runtime.events(LABELS, never):
                pass

        thread = threading.Thread(target=consume, name="vt-events", daemon=True)
        thread.start()
        await asyncio.sleep(5)
        runtime.close()
        return thread

    thread = run_virtual(main)
    thread.join(5)
    assert not thread.is_alive()
