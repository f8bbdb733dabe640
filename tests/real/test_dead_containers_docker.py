"""Dead agent containers stay until the supervisor removes them, so their log tails are kept.

With Docker's auto-remove, a dead container and its logs were gone ~100 ms
after ``die``: on a loaded host the slot parked without its tail. Agents now
run without it; the engine reads a failed container's tail, then removes it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import pytest

from gpuci_tui.core.docker.agentspec import build_spec
from gpuci_tui.core.docker.runtime import DockerRuntime
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.core.models import SlotState
from tests.core.supervisor_env import StaticTokens, make_env
from tests.core.supervisor_env import wait_until as async_wait_until
from tests.real.docker_runtime_helpers import EventCollector, make_spec, secret, wait_until

pytestmark = pytest.mark.docker

#: How late the tail is read: far beyond Docker's ~100 ms auto-remove.
LATE = 1.5


def test_a_dead_containers_tail_can_be_read_late(
    runtime: DockerRuntime, busybox_image: str, run_label: str
) -> None:
    labels = {"gpuci.test": run_label, "gpuci.case": "late"}
    collector = EventCollector(runtime, labels, time.time() - 1)
    script = "echo fatal: the PAT was refused >&2; exit 3"
    spec = make_spec(run_label, "late", busybox_image, command=("sh", "-c", script))
    assert spec.auto_remove is False  # the default, as for agents (agentspec.build_spec)
    info = runtime.start(spec, secret())
    die = collector.wait_for(lambda e: e.action == "die" and e.container_id == info.id)
    # Still there LATE seconds after its exit (an auto-removed one would be gone)...
    assert wait_until(lambda: time.time() > die.time + LATE, LATE + 5)
    (dead,) = runtime.list_containers(labels)
    assert (dead.id, dead.status, dead.exit_code) == (info.id, "exited", 3)
    # ...with its tail; the engine's removal then makes the destroy.
    assert runtime.logs_tail(info.id) == ["fatal: the PAT was refused"]
    runtime.remove(info.id)
    collector.wait_for(lambda e: e.action == "destroy" and e.container_id == info.id)
    assert runtime.list_containers(labels) == []
    collector.close()


class LateLogs:
    """The real runtime, reading log tails `LATE` seconds late (a loaded host)."""

    def __init__(self, runtime: DockerRuntime) -> None:
        self.runtime = runtime

    def __getattr__(self, name: str) -> Any:
        return getattr(self.runtime, name)

    def logs_tail(self, container_id: str, lines: int = 20) -> list[str]:
        time.sleep(LATE)  # the scenario: a loaded host reads the tail late
        return self.runtime.logs_tail(container_id, lines)


async def test_a_crash_looping_slot_parks_with_its_tail_read_late(
    runtime: DockerRuntime, busybox_image: str, run_label: str
) -> None:
    env = make_env()
    agents = replace(env.config.agents, count=1, image=busybox_image, network="host")
    config = replace(env.config, agents=agents)
    sup = Supervisor(
        config,
        api=env.api,
        runtime=LateLogs(runtime),  # type: ignore[arg-type]
        tokens=StaticTokens(),
        extra_labels={"gpuci.test": run_label},
        command=("sh", "-c", "echo fatal: cannot register; exit 1"),
    )
    task = asyncio.create_task(sup.run())
    try:

        def parked_with_tail() -> bool:
            slot = sup.snapshot().slots[0]
            last = slot.last_exit
            return slot.state == SlotState.PARKED and last is not None and bool(last.log_tail)

        await async_wait_until(parked_with_tail, timeout=60, what="parked, with its tail")
        last = sup.snapshot().slots[0].last_exit
        assert last is not None and last.code == 1
        assert last.log_tail == ("fatal: cannot register",)
        # Every dead container was removed by the engine, the last one after its tail.
        mine = {"gpuci.test": run_label}
        await async_wait_until(lambda: runtime.list_containers(mine) == [], timeout=15)
    finally:
        sup.request_stop()
        await asyncio.wait_for(task, 10)


async def test_a_supervisor_that_starts_removes_dead_leftovers_after_their_tail(
    runtime: DockerRuntime, busybox_image: str, run_label: str
) -> None:
    """Slot 0's agent failed while no supervisor ran; slot 1's finished its job cleanly."""
    env = make_env()
    agents = replace(env.config.agents, count=2, image=busybox_image, network="host")
    config = replace(env.config, agents=agents)
    extra = {"gpuci.test": run_label}
    crashed = build_spec(
        config, 0, extra_labels=extra, command=("sh", "-c", "echo fatal: x; exit 2")
    )
    clean = build_spec(config, 1, extra_labels=extra, command=("sh", "-c", "exit 0"))
    ids = {runtime.start(crashed, secret()).id, runtime.start(clean, secret()).id}
    mine = {"gpuci.test": run_label}
    assert wait_until(
        lambda: {c.id for c in runtime.list_containers(mine) if c.status == "exited"} == ids
    )
    sup = Supervisor(
        config,
        api=env.api,
        runtime=LateLogs(runtime),  # type: ignore[arg-type]
        tokens=StaticTokens(),
        extra_labels=extra,
        command=("sleep", "300"),
    )
    task = asyncio.create_task(sup.run())
    try:

        def leftovers_gone() -> bool:
            return not ids & {c.id for c in runtime.list_containers(mine)}

        await async_wait_until(leftovers_gone, timeout=20, what="the dead leftovers removed")
        last = sup.snapshot().slots[0].last_exit
        assert last is not None and last.code == 2 and last.log_tail == ("fatal: x",)
        assert sup.snapshot().slots[1].last_exit is None, "a clean exit is no failure to show"
        # And the names were free again: both slots run fresh containers.
        await async_wait_until(
            lambda: len([c for c in runtime.list_containers(mine) if c.status == "running"]) == 2,
            timeout=20,
            what="both slots refilled",
        )
    finally:
        sup.request_stop()
        await asyncio.wait_for(task, 10)
