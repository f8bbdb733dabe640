"""Agent groups: the configuration's [groups.NAME] tables, the host's GPUs, one daemon for all."""

from __future__ import annotations

import argparse
import asyncio
import collections
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.cli.common import CliExit
from gpuci_tui.cli.control_cmds import build_commands, parse_slot
from gpuci_tui.core.command_types import Drain, Restart, Scale
from gpuci_tui.core.config.loader import (
    ConfigError,
    agent_groups,
    daemon_instance,
    for_group,
    instance_id,
    load_config,
    save_config,
)
from gpuci_tui.core.docker.agentspec import LABEL_GROUP, build_spec, slot_gpus
from gpuci_tui.core.gpu.check import check_host_gpus
from gpuci_tui.core.gpu_readings import GpuFrame, GpuHostInfo, GpuProcess, GpuSample
from gpuci_tui.core.host.supervision.group_supervisor import GroupSupervisor
from gpuci_tui.core.models import SlotState
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.runtime import DEFAULT_IMAGE
from tests.core.supervisor_env import StaticTokens, wait_until
from tests.core.virtual_env import VirtualEnv, on_virtual_time
from tests.core.virtual_runtime import VirtualRuntime

BASE = """
[azure]
url = "https://dev.azure.com/org"
pool = "gpu"

[agents]
image = "repo/agent:cuda12"
name_prefix = "box"
"""

TWO_GROUPS = (
    BASE
    + """
[groups.cuda12]
count = 2
gpus = ["0", "1"]

[groups.cuda13]
pool = "gpu13"
count = 2
image = "repo/agent:cuda13"
gpus = { per_agent = ["2", "3"] }
standby = false
"""
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def problems(tmp_path: Path, text: str) -> list[str]:
    try:
        load_config(write(tmp_path, text))
    except ConfigError as exc:
        return [f"{e.key}: {e.problem}" for e in exc.errors]
    return []


def test_groups_take_agents_as_defaults_and_get_their_own_names(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, TWO_GROUPS))
    groups = {g.name: g for g in agent_groups(config)}
    c12, c13 = groups["cuda12"], groups["cuda13"]
    assert (c12.pool, c12.agents.image, c12.agents.name_prefix) == (
        "gpu", "repo/agent:cuda12", "box-cuda12",
    )  # fmt: skip
    assert (c13.pool, c13.agents.image, c13.agents.standby) == ("gpu13", "repo/agent:cuda13", False)
    one = for_group(config, c12)
    assert [slot_gpus(one, i) for i in range(2)] == [("0", "1"), ("0", "1")]
    thirteen = for_group(config, c13)
    assert [slot_gpus(thirteen, i) for i in range(2)] == [("2",), ("3",)]
    spec = build_spec(thirteen, 1, extra_labels={LABEL_GROUP: "cuda13"})
    assert spec.name == "box-cuda13-1" and spec.labels[LABEL_GROUP] == "cuda13"
    assert spec.environment["AZP_POOL"] == "gpu13"
    save_config(config, tmp_path / "again.toml")
    assert load_config(tmp_path / "again.toml").groups == config.groups


def test_a_group_that_differs_from_agents_only_in_its_gpu_ids_keeps_them(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, TWO_GROUPS))
    first, second = config.groups
    # The group's policy equals [agents]' (its defaults); only the ids tell them apart.
    agents = replace(config.agents, gpus="per-agent", gpu_ids=())
    same_policy = replace(second.agents, gpus="per-agent", gpu_ids=("4", "5"))
    config = replace(config, agents=agents, groups=(first, replace(second, agents=same_policy)))
    save_config(config, tmp_path / "again.toml")
    assert load_config(tmp_path / "again.toml").groups == config.groups


def test_an_agents_only_file_is_one_group_with_the_same_identity(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, BASE.replace("[agents]", "[agents]\ncount = 2")))
    (group,) = agent_groups(config)
    assert group.implicit and group.name == "default"
    assert daemon_instance(config) == instance_id(config) == instance_id(for_group(config, group))


@pytest.mark.parametrize(
    ("tables", "expected"),
    [
        (
            '[groups.a]\ncount = 1\ngpus = ["0"]\n[groups.b]\ncount = 1\ngpus = ["0", "1"]\n',
            "groups.b.gpus: gives GPU 0 to this group and to group a; a GPU belongs to one group",
        ),
        (
            '[groups.a]\ncount = 1\nname_prefix = "x"\n[groups.b]\ncount = 1\nname_prefix = "x"\n'
            'gpus = "none"\n',
            'groups.b.name_prefix: is "x", the name prefix of group a too; give each group its own',
        ),
        (
            '[groups.a]\ncount = 1\ngpus = "all"\n[groups.b]\ncount = 1\ngpus = ["3"]\n',
            'groups.b.gpus: shares GPUs with group a, which has gpus = "all"',
        ),
        (
            '[groups.a]\ncount = 3\ngpus = { per_agent = ["0", "1"] }\n',
            "groups.a.count: is 3, but gpus per_agent lists 2 GPUs (one per slot)",
        ),
        (
            "[groups.Big]\ncount = 1\n",
            "groups.Big: is not a group name: lowercase letters, digits, '-' and '_', at most 20, "
            'starting with a letter or digit, got "Big"',
        ),
        (
            '[groups.a]\ngpus = "none"\n',
            "groups.a.count: is missing; add count = 2 here or in [agents]",
        ),
        (
            '[groups.a]\ncount = 1\nimgae = "x"\n',
            'groups.a.imgae: unknown key; did you mean "image"? allowed: count, image, name_prefix, '
            "network, gpus_per_slot, oom_score_adj, mem_limit, docker_socket, standby, standby_min, "
            "standby_max, max_agents, standby_schedule, gpu_admission, gpu_hold_down, pull, "
            "pull_check_interval, gpus, volumes, pool",
        ),
        (
            '[groups.a]\ncount = 1\ngpus = ["zero"]\n',
            'groups.a.gpus: holds "zero": a GPU is an NVML index ("0") or UUID ("GPU-…")',
        ),
        (
            "[groups.a]\ncount = 0\n",
            "groups.a.count: must be a whole number from 1 to 64, got 0",
        ),
    ],
)
def test_group_rules_say_what_is_wrong_and_where(
    tmp_path: Path, tables: str, expected: str
) -> None:
    assert expected in problems(tmp_path, BASE + tables)


def frame(*gpus: GpuSample) -> GpuFrame:
    return GpuFrame(taken_at=0.0, host=GpuHostInfo(True, gpu_count=len(gpus)), gpus=gpus)


def gpu(index: int, *procs: GpuProcess) -> GpuSample:
    return GpuSample(index=index, name="A100", uuid=f"GPU-0000000{index}-aaaa", processes=procs)


def test_host_check_finds_missing_gpus_uuid_overlaps_and_foreign_processes(
    tmp_path: Path,
) -> None:
    config = load_config(write(tmp_path, TWO_GROUPS))
    errors, _ = check_host_gpus(config, frame(gpu(0), gpu(1), gpu(2)))
    assert [f"{e.key}: {e.problem}" for e in errors] == [
        "groups.cuda13.gpus: names GPU 3, which NVML does not see on this host (GPUs: 0, 1, 2)"
    ]
    twice = TWO_GROUPS.replace('per_agent = ["2", "3"]', 'per_agent = ["GPU-00000001-aaaa", "2"]')
    errors, _ = check_host_gpus(load_config(write(tmp_path, twice)), frame(*map(gpu, range(4))))
    assert "by index and by UUID" in errors[0].problem
    foreign = GpuProcess(pid=77, name="python", used_memory_mib=900.0)
    ours = GpuProcess(pid=78, container_id="c" * 64)
    _, warnings = check_host_gpus(
        config, frame(gpu(0), gpu(1), gpu(2, foreign, ours), gpu(3)), ours={"c" * 64}
    )
    assert warnings == [
        "GPU 2 (group cuda13) is in use by pid 77 (python, the host, 900 MiB) outside "
        "gpuci-tui: jobs on it will share it"
    ]


def args(**kw: Any) -> argparse.Namespace:
    base = {"command": "drain", "slots": [], "all": False, "group": None}
    return argparse.Namespace(**{**base, **kw})


def test_slots_are_numbers_or_group_slash_number() -> None:
    assert parse_slot("3", "drain") == (None, 3)
    assert parse_slot("cuda12/0", "drain") == ("cuda12", 0)
    with pytest.raises(CliExit, match="give SLOT or GROUP/SLOT"):
        parse_slot("cuda12/x", "drain")
    commands = build_commands(args(slots=["cuda12/0", "cuda13/1", "cuda12/1"]))
    assert commands == [Drain((0, 1), "cuda12"), Drain((1,), "cuda13")]
    assert build_commands(args(all=True, group="cuda13")) == [Drain(None, "cuda13")]
    scale = argparse.Namespace(command="scale", count=3, group="cuda12")
    assert build_commands(scale) == [Scale(3, "cuda12")]


def world(env: VirtualEnv, tmp_path: Path) -> tuple[SimOrg, SimPoolApi, VirtualRuntime, Any]:
    """The virtual world with a second pool and a config of three groups over the two."""
    env.org.add_pool("gpu13")
    text = (
        TWO_GROUPS.replace("repo/agent:cuda12", DEFAULT_IMAGE)
        .replace("repo/agent:cuda13", DEFAULT_IMAGE)
        .replace('url = "https://dev.azure.com/org"', 'url = "http://127.0.0.1:9"')
        + '\n[groups.small]\ncount = 1\ngpus = "none"\n\n[supervisor]\npoll_interval = 0.5\n'
    )
    return env.org, env.api, env.runtime, load_config(write(tmp_path, text))


@on_virtual_time
async def test_one_daemon_runs_every_group_reading_each_pool_once_per_cycle(
    env: VirtualEnv, tmp_path: Path
) -> None:
    """On virtual time (tests/core/virtual_env.py): its 2 s window is exactly 2 s."""
    org, api, runtime, config = world(env, tmp_path)
    calls: collections.Counter[int] = collections.Counter()
    list_agents = api.list_agents

    def counted(pool_id: int, **kwargs: Any) -> Any:
        calls[pool_id] += 1
        return list_agents(pool_id, **kwargs)

    api.list_agents = counted  # type: ignore[method-assign]
    sup = GroupSupervisor(config, api=api, runtime=runtime, tokens=StaticTokens(), clock=env.clock)
    task = asyncio.create_task(sup.run())
    try:

        def ready() -> bool:
            snap = sup.snapshot()
            return len(snap.slots) == 5 and all(s.state == SlotState.IDLE for s in snap.slots)

        await wait_until(ready, timeout=20, what="five idle slots in three groups")
        snap = sup.snapshot()
        assert sorted(s.key for s in snap.slots) == [
            "cuda12/0", "cuda12/1", "cuda13/0", "cuda13/1", "small/0",
        ]  # fmt: skip
        assert {g.name: g.pool for g in snap.groups} == {
            "cuda12": "gpu", "cuda13": "gpu13", "small": "gpu",
        }  # fmt: skip
        assert len(sup.pools) == 2 and {p.name for p in snap.pools} == {"gpu", "gpu13"}
        names = {c.name for c in runtime.list_containers({}) if c.status == "running"}
        assert {"box-cuda13-0", "box-cuda13-1", "box-cuda12-0", "box-small-0"} <= names
        assert "box-cuda13-0-b" not in names, "standby is off in group cuda13"
        # One agents-list per pool per cycle, whatever the number of groups in it.
        calls.clear()
        await asyncio.sleep(2.0)  # a measurement window, not a synchronisation
        assert set(calls) == {42, 43}
        assert max(calls.values()) <= 2 * 4 + 1, calls
        # Commands are routed by group.
        result = await sup.execute(Drain((0,)))
        assert not result.ok and "name the group of the slots, e.g. cuda12/0" in result.message
        result = await sup.execute(Drain((0,), "cuda13"))
        assert result.ok
        await wait_until(
            lambda: sup.snapshot().slot(0, "cuda13").state == SlotState.DRAINED,  # type: ignore[union-attr]
            what="cuda13/0 drained",
        )
        assert sup.snapshot().slot(0, "cuda12").state == SlotState.IDLE  # type: ignore[union-attr]
        preview = sup.preview(Restart(None))
        assert len(preview.effects) == 5
        assert not (await sup.execute(Scale(3))).ok
        assert (await sup.execute(Scale(2, "small"))).ok
        await wait_until(lambda: len(sup.snapshot().slots) == 6, what="small scaled to 2")
    finally:
        sup.request_stop()
        await asyncio.wait_for(task, 10)
    assert replace(config).groups == config.groups


def test_check_config_lists_each_group(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpuci_tui.cli import exitcodes
    from gpuci_tui.cli.main import main

    path = write(tmp_path, TWO_GROUPS)
    assert main(["--config", str(path), "check-config"]) == exitcodes.OK
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(": OK (2 agent groups)")
    assert out[1].startswith("  cuda12: 2 slots box-cuda12-0…, pool 'gpu'")
    assert out[1].endswith("GPUs 0,1 (shared)")
    assert out[2] == (
        "    GPU admission: exclusive (no process outside gpuci-tui's containers on the "
        "slot's GPUs); hold-down 10 s"
    )
    assert out[3].endswith("pool 'gpu13', image repo/agent:cuda13, GPUs per agent 2,3")
