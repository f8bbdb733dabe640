"""``reload`` on the group supervisor: kept groups reconfigured, groups added and removed live.

`Supervisor.reconfigure`/`preview_reconfigure` (the roll-out inside a group) are
built elsewhere: here a test double records what the group supervisor hands them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.command_types import Reload
from gpuci_tui.core.config.loader import Config, load_config
from gpuci_tui.core.host.instance import AlreadyRunningError
from gpuci_tui.core.host.supervision.group_supervisor import GroupSupervisor
from gpuci_tui.core.models import SlotState
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.runtime import DEFAULT_IMAGE, SimulatedRuntime
from tests.core.reload_double import Recorded, two_groups
from tests.core.supervisor_env import PAT, StaticTokens, wait_until
from tests.core.virtual_env import VirtualEnv, on_virtual_time

TEXT = two_groups("http://127.0.0.1:9", "box")

WITHOUT_B = TEXT.replace("[groups.b]\ncount = 1\n", "")
WITH_C = WITHOUT_B + "\n[groups.c]\ncount = 1\n"


@pytest.fixture
def world(tmp_path: Path) -> tuple[SimPoolApi, SimulatedRuntime, Path]:
    org = SimOrg(heartbeat_timeout=3.0)
    org.add_pat(PAT)
    org.add_pool("gpu")
    runtime = SimulatedRuntime(org, destroy_delay=0.05)
    path = tmp_path / "config.toml"
    path.write_text(TEXT, encoding="utf-8")
    return SimPoolApi(org, PAT), runtime, path


def group_supervisor(
    world: tuple[SimPoolApi, SimulatedRuntime, Path], **kw: Any
) -> GroupSupervisor:
    api, runtime, path = world
    return GroupSupervisor(load_config(path), api=api, runtime=runtime, tokens=StaticTokens(), **kw)


async def test_dry_run_says_what_changes_and_changes_nothing(
    world: tuple[SimPoolApi, SimulatedRuntime, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = Recorded(monkeypatch)
    sup = group_supervisor(world)
    before = sup.config
    text = TEXT.replace("[groups.a]\ncount = 1", '[groups.a]\ncount = 1\nimage = "repo/x:v2"')
    world[2].write_text(text.replace('pool = "gpu"', 'pool = "gpu"\n', 1), encoding="utf-8")
    result = await sup.execute(Reload(dry_run=True, canary=1))
    assert result.ok, result.message
    lines = result.message.splitlines()
    assert lines[1].startswith('  groups.a.image: "gpuci-sim/agent:1" -> "repo/x:v2": the slots')
    assert "    slot 0: replaced now with repo/x:v2" in lines
    assert "  group b: no change" in lines
    assert [(g, c.agents.image, n) for g, c, n in recorded.previews] == [("a", "repo/x:v2", 1)]
    assert recorded.calls == [] and sup.config is before
    # The console's confirmation reads the same words from the preview.
    preview = sup.preview(Reload(canary=1))
    assert preview.ok and preview.message == result.message


async def test_kept_groups_get_only_their_live_changes(
    world: tuple[SimPoolApi, SimulatedRuntime, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = Recorded(monkeypatch)
    sup = group_supervisor(world)
    text = TEXT.replace(
        "[groups.a]\ncount = 1", '[groups.a]\ncount = 2\nimage = "repo/x:v2"\nname_prefix = "new"'
    )
    world[2].write_text(text + "\n", encoding="utf-8")
    result = await sup.execute(Reload(canary=1, canary_jobs=4))
    assert result.ok, result.message
    assert len(recorded.calls) == 1
    group, config, canary, jobs = recorded.calls[0]
    assert (group, config.agents.image, config.agents.count, canary, jobs) == (
        "a", "repo/x:v2", 2, 1, 4,
    )  # fmt: skip
    # The name prefix needs a restart: the group keeps running under its old names.
    assert config.agents.name_prefix == "box-a"
    assert "groups.a.name_prefix" in result.message and "a restart is needed" in result.message
    assert sup.config.groups[0].agents.image == "repo/x:v2"
    assert sup.config.groups[0].agents.name_prefix == "box-a"
    events = [e.message for e in sup.events if e.kind == "reload"]
    assert events == ["reload: 2 changes applied; 1 needs a restart"]
    # Without --canary-jobs the default is [supervisor] canary_jobs.
    await sup.execute(Reload(canary=1))
    assert recorded.calls == [recorded.calls[0]]  # nothing changed the second time


async def test_a_bad_file_loses_nothing(
    world: tuple[SimPoolApi, SimulatedRuntime, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = Recorded(monkeypatch)
    sup = group_supervisor(world)
    before = sup.config
    world[2].write_text(TEXT.replace("[groups.a]\ncount = 1", "[groups.a]\ncount = -1"))
    for command in (Reload(), Reload(dry_run=True)):
        result = await sup.execute(command)
        assert not result.ok
        assert "the file has problems, nothing changed" in result.message
        assert "groups.a.count" in result.message
    assert sup.config is before and set(sup.children) == {"a", "b"}
    assert recorded.calls == []


@on_virtual_time
async def test_groups_added_and_removed_while_running(
    env: VirtualEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On virtual time (tests/core/virtual_env.py): groups drain and start on the loop's clock."""
    path = tmp_path / "config.toml"
    path.write_text(TEXT, encoding="utf-8")
    world = (env.api, env.runtime, path)
    Recorded(monkeypatch)
    released: list[str] = []

    def claim(group: Config) -> Any:
        if group.agents.name_prefix == "box-held":
            raise AlreadyRunningError("another gpuci-tui run (pid 1) already supervises it")
        return lambda: released.append(group.agents.name_prefix)

    sup = group_supervisor(world, claim_group=claim, clock=env.clock)
    runtime = world[1]
    task = asyncio.create_task(sup.run())
    try:

        def idle(keys: set[str]) -> bool:
            slots = sup.snapshot().slots
            return {s.key for s in slots} == keys and all(s.state == SlotState.IDLE for s in slots)

        await wait_until(lambda: idle({"a/0", "b/0"}), timeout=20, what="a/0 and b/0 idle")
        # b removed, then added again before it drained: refused (one supervisor per group).
        world[2].write_text(WITHOUT_B, encoding="utf-8")
        assert (await sup.execute(Reload())).ok
        world[2].write_text(TEXT, encoding="utf-8")
        again = await sup.execute(Reload())
        assert not again.ok and "still draining from the last reload" in again.message
        assert [g.name for g in sup.config.groups] == ["a"]
        await wait_until(lambda: "b" not in sup.children, timeout=20, what="b drained")
        world[2].write_text(WITH_C + "\n[groups.held]\ncount = 1\n", encoding="utf-8")
        result = await sup.execute(Reload())
        assert not result.ok  # the held group could not be added; the rest is applied
        assert "group b: removed" not in result.message  # already gone
        assert "group c: added: 1 slot starts" in result.message
        assert "not added: another gpuci-tui run (pid 1)" in result.message
        await wait_until(lambda: idle({"a/0", "c/0"}), timeout=20, what="b gone, c/0 idle")
        assert set(sup.children) == {"a", "c"} and sup.retiring == set()
        assert [g.name for g in sup.config.groups] == ["a", "c"]
        names = {c.name for c in runtime.list_containers({}) if c.status == "running"}
        assert "box-b-0" not in names and "box-c-0" in names
        assert "group b drained and removed" in [e.message for e in sup.events]
        # Back again: b is added (its own lock), c is removed and its lock released.
        world[2].write_text(TEXT, encoding="utf-8")
        assert (await sup.execute(Reload())).ok
        await wait_until(lambda: idle({"a/0", "b/0"}), timeout=20, what="b back, c gone")
        assert released == ["box-c"]
    finally:
        sup.request_stop()
        await asyncio.wait_for(task, 10)


async def test_an_image_the_driver_cannot_run_is_refused_before_anything_changes(
    world: tuple[SimPoolApi, SimulatedRuntime, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = Recorded(monkeypatch)
    sup = group_supervisor(world)
    before = sup.config
    asked: list[str] = []

    def refusal(config: Config) -> str:
        asked.append(config.agents.image)
        return (
            "image needs CUDA 12.4; driver 535 supports up to 12.2"
            if "cu124" in config.agents.image
            else ""
        )

    sup.cuda_refusal = refusal
    text = TEXT.replace("[groups.a]\ncount = 1", '[groups.a]\ncount = 2\nimage = "repo/x:cu124"')
    text = text.replace("[groups.b]\ncount = 1", "[groups.b]\ncount = 2")
    world[2].write_text(
        text + '\n[groups.c]\ncount = 1\nimage = "repo/y:cu124"\n', encoding="utf-8"
    )
    refused = "not applied, its slots keep gpuci-sim/agent:1: image needs CUDA 12.4"
    preview = await sup.execute(Reload(dry_run=True, canary=1))
    assert f"\n    group a: {refused}" in preview.message, preview.message
    assert "    group c: not added: image needs CUDA 12.4" in preview.message
    assert [g for g, _, _ in recorded.previews] == ["b"] and sup.config is before  # not a
    result = await sup.execute(Reload(canary=1))
    assert not result.ok
    assert f"\n    group a: {refused}" in result.message, result.message
    # Group a: nothing of it applied (not even its count); b (no image change) scales;
    # c is not added. Only the groups whose image changes or that are added were asked.
    assert [(g, c.agents.count) for g, c, _, _ in recorded.calls] == [("b", 2)]
    assert set(sup.children) == {"a", "b"}
    assert [g.agents.image for g in sup.config.groups] == [DEFAULT_IMAGE, DEFAULT_IMAGE]
    assert [g.agents.count for g in sup.config.groups] == [1, 2]
    assert sorted(set(asked)) == ["repo/x:cu124", "repo/y:cu124"]
    events = [e.message for e in sup.events if e.kind == "reload"]
    assert events[-1] == "reload: refused a, c (CUDA); 1 change applied", events
