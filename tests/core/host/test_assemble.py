"""One assembly: ``console --foreground`` gets what the daemon has (groups, history, intent)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.cli import console_cmd, run_cmd
from gpuci_tui.core.command_types import Scale, Stop
from gpuci_tui.core.config.loader import daemon_instance, instance_id, load_config
from gpuci_tui.core.config.paths import history_db_path
from gpuci_tui.core.docker.agentspec import LABEL_GROUP
from gpuci_tui.core.host.assemble import assemble
from gpuci_tui.core.host.daemon import DaemonPaths
from gpuci_tui.core.host.supervision.group_supervisor import GroupSupervisor
from gpuci_tui.core.models import SlotState
from gpuci_tui.core.store.history import JobHistory, JobQuery, JobRecord
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.runtime import DEFAULT_IMAGE, SimulatedRuntime
from tests.core.supervisor_env import PAT, StaticTokens, wait_until
from tests.waiting import wait_until_async

CONFIG = f"""
[azure]
url = "http://127.0.0.1:9"
pool = "gpu"

[agents]
image = "{DEFAULT_IMAGE}"
name_prefix = "box"
count = 1

[supervisor]
poll_interval = 0.5

[groups.a]
count = 1
gpus = "none"

[groups.b]
count = 1
gpus = "none"
"""


@pytest.fixture
def org() -> SimOrg:
    org = SimOrg(heartbeat_timeout=3.0)
    org.add_pat(PAT)
    org.add_pool("gpu")
    return org


async def test_foreground_console_has_groups_history_and_intent(
    org: SimOrg, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(CONFIG)
    config = load_config(path)
    api, runtime = SimPoolApi(org, PAT), SimulatedRuntime(org, destroy_delay=0.05)
    monkeypatch.setattr(
        run_cmd, "real_services", lambda cfg, tokens=None: (api, runtime, StaticTokens())
    )
    handle = console_cmd.in_process_supervisor(config)
    try:

        async def idle() -> bool:
            snap = await handle.snapshot()
            return len(snap.slots) == 2 and all(s.state == SlotState.IDLE for s in snap.slots)

        await wait_until_async(idle, 20, "two idle slots in two groups")
        snap = await handle.snapshot()
        assert {g.name for g in snap.groups} == {"a", "b"}
        assert snap.instance == daemon_instance(config)
        # Intent is saved per group, where the daemon keeps it.
        assert (await handle.send(Scale(2, "a"))).ok
        intent = DaemonPaths.for_instance(instance_id(config_for(config, "a"))).intent
        await wait_until(
            lambda: intent.exists() and json.loads(intent.read_text()).get("count") == 2,
            what="group a's intent saved",
        )
        # Finished jobs go to the history, as the daemon writes them.
        pool_id = org.pools("gpu")[0].id
        job = org.queue_job(pool_id, pipeline="eval - nightly", duration=0.2)
        history = JobHistory(history_db_path())
        await wait_until(
            lambda: any(r.request_id == job for r in history.query(JobQuery())),
            timeout=20,
            what="the job in the history",
        )
        history.close()
    finally:
        await handle.send(Stop())
        await console_cmd.close_in_process()


def config_for(config: Any, name: str) -> Any:
    from gpuci_tui.core.config.loader import agent_groups, for_group

    return for_group(config, next(g for g in agent_groups(config) if g.name == name))


async def test_one_group_is_still_a_group_that_looks_like_a_lone_supervisor(
    org: SimOrg, tmp_path: Path
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(CONFIG.split("[groups.a]")[0])
    config = load_config(path)
    api, runtime = SimPoolApi(org, PAT), SimulatedRuntime(org, destroy_delay=0.05)
    parts = assemble(
        config,
        api=api,
        runtime=runtime,
        tokens=StaticTokens(),
        history=JobHistory(":memory:"),
        mode="in-process",
    )
    sup = parts.supervisor
    assert isinstance(sup, GroupSupervisor) and list(parts.recorders) == [""]
    task = asyncio.create_task(sup.run())
    try:
        await wait_until(
            lambda: [s.state for s in sup.snapshot().slots] == [SlotState.IDLE],
            timeout=20,
            what="one idle slot",
        )
        snap = sup.snapshot()
        assert (
            snap.groups == () and snap.slots[0].group == "" and snap.instance == instance_id(config)
        )
        # No group to name: commands go to the only one, as to a lone supervisor.
        assert (await sup.execute(Scale(2))).ok
        labels = {k for c in runtime.list_containers({}) for k in c.labels}
        assert LABEL_GROUP not in labels
    finally:
        sup.request_stop()
        await asyncio.wait_for(task, 10)


def test_a_restarted_daemon_starts_auto_from_its_history(org: SimOrg, tmp_path: Path) -> None:
    """The assembly reads the history once: "auto" knows 3-s jobs and 9-s start-ups at once."""
    path = tmp_path / "config.toml"
    path.write_text(
        CONFIG.split("[groups.a]")[0].replace("count = 1", 'count = 1\nstandby = "auto"')
    )
    config = load_config(path)
    history = JobHistory(":memory:")
    for n in range(5):  # what the daemon wrote before it was restarted
        history.add(
            JobRecord(
                instance=instance_id(config), slot=0, agent="box-0", request_id=n,
                pipeline="train", run="1", started_at=100.0 * n, ended_at=100.0 * n + 12.5,
                exit_code=0, oom=False, reason="job finished", result="succeeded",
                duration_s=3.0, startup_s=9.0,
            )
        )  # fmt: skip
    history.add(JobRecord("another-host", 0, "x-0", 9, None, None, 0.0, 1.0, 0, False, "",
                          result="succeeded", duration_s=60.0, startup_s=1.0))  # fmt: skip
    parts = assemble(
        config,
        api=SimPoolApi(org, PAT),
        runtime=SimulatedRuntime(org),
        tokens=StaticTokens(),
        history=history,
        mode="in-process",
    )
    sup = parts.supervisor
    assert isinstance(sup, GroupSupervisor)
    auto = next(iter(sup.children.values())).state.auto
    assert auto is not None and (auto.job_s, auto.startup_s) == (3.0, 9.0)
