"""Runtime overrides on a daemon (`serve`): shown beside the file, listed by a dry run, reset.

Issue 28: the file says ``count = 2``, a runtime ``scale 1`` wins, and ``status``
showed 1 while ``reload --dry-run`` said "the configuration file has no change":
nothing said why. Now ``status`` (text and JSON) says "count 1, scaled at HH:MM;
the file says 2", the dry run lists the overrides in force, a reload of another
value keeps them, a reload of the count is the file's, and ``reload
--reset-overrides`` drops them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gpuci_tui.cli import exitcodes
from gpuci_tui.core.host.supervision.group_supervisor import GroupSupervisor
from gpuci_tui.core.models import SlotState
from gpuci_tui.sim.runtime import DEFAULT_IMAGE
from tests.core.served_daemon import Daemon, served
from tests.core.supervisor_env import wait_until

TEXT = f"""
[azure]
url = "http://127.0.0.1:9/overrides"
pool = "gpu"

[agents]
count = 2
image = "{DEFAULT_IMAGE}"
name_prefix = "ovr"
gpus = "none"
standby = false

[supervisor]
poll_interval = 0.2
"""
SCALED = "count 1, scaled at "


def running(sup: GroupSupervisor, count: int = 2) -> bool:
    slots = [s for s in sup.snapshot().slots if s.state != SlotState.DRAINED]
    return len(slots) == count and all(s.state == SlotState.IDLE for s in slots)


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[Daemon]:
    async with served(tmp_path / "config.toml", TEXT, running) as up:
        yield up


async def test_a_scale_shows_beside_the_file_and_a_reset_runs_the_file_again(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await daemon.cli("scale", "1") == exitcodes.OK
    assert await daemon.cli("drain", "0") == exitcodes.OK
    capsys.readouterr()

    assert await daemon.cli("status") == exitcodes.OK
    out = capsys.readouterr().out
    assert f"override: {SCALED}" in out and "; the file says 2" in out
    assert "override: slot 0 drained at " in out and "; the file runs it" in out
    assert "gpuci-tui reload --reset-overrides runs the file again" in out

    assert await daemon.cli("status", "--json") == exitcodes.OK
    overrides = json.loads(capsys.readouterr().out)["overrides"]
    assert [(o["kind"], o["value"], o["file_value"]) for o in overrides] == [
        ("scale", "1", "2"),
        ("drain", "0", ""),
    ]
    assert all(isinstance(o["at"], float) for o in overrides)

    assert await daemon.cli("reload", "--dry-run") == exitcodes.OK
    out = capsys.readouterr().out
    assert "the configuration file has no change" in out
    assert "overrides in force (they stay; reload --reset-overrides drops them):" in out
    assert f"    {SCALED}" in out

    assert await daemon.cli("reload", "--dry-run", "--reset-overrides") == exitcodes.OK
    assert "overrides dropped (--reset-overrides): the groups run the file" in (
        capsys.readouterr().out
    )
    assert daemon.sup.snapshot().desired_count == 1  # a dry run changes nothing

    assert await daemon.cli("reload", "--reset-overrides") == exitcodes.OK
    out = capsys.readouterr().out
    assert "overrides dropped: count 1 -> 2 (the file's); resumed ovr-0" in out
    await wait_until(lambda: running(daemon.sup), timeout=20, what="both slots again")
    assert daemon.sup.snapshot().overrides == ()
    assert await daemon.cli("status") == exitcodes.OK
    assert "override:" not in capsys.readouterr().out


async def test_a_reload_keeps_a_scale_unless_the_file_changes_the_count(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await daemon.cli("scale", "1") == exitcodes.OK
    other = TEXT.replace("standby = false", "standby = false\ngpu_hold_down = 5.0")
    await asyncio.to_thread(daemon.path.write_text, other, encoding="utf-8")
    assert await daemon.cli("reload") == exitcodes.OK
    out = capsys.readouterr().out
    assert "agents.gpu_hold_down" in out and f"    {SCALED}" in out
    assert daemon.sup.snapshot().desired_count == 1

    await asyncio.to_thread(daemon.path.write_text, other.replace("count = 2", "count = 3"))
    assert await daemon.cli("reload") == exitcodes.OK
    assert "agents.count: 2 -> 3" in capsys.readouterr().out
    await wait_until(lambda: running(daemon.sup, 3), timeout=20, what="the file's three slots")
    assert daemon.sup.snapshot().overrides == ()


async def test_a_broken_files_dry_run_still_lists_the_overrides(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await daemon.cli("pause") == exitcodes.OK
    broken = TEXT.replace("count = 2", 'count = "three"')
    await asyncio.to_thread(daemon.path.write_text, broken, encoding="utf-8")
    capsys.readouterr()
    assert await daemon.cli("reload", "--dry-run", "--reset-overrides") == exitcodes.CONFIG
    out = capsys.readouterr().out
    assert "the file has problems, nothing changed" in out
    assert "replenishing paused at " in out
    assert await daemon.cli("reload", "--reset-overrides") == exitcodes.CONFIG
    assert daemon.sup.snapshot().paused  # a broken file changes nothing, the reset neither
