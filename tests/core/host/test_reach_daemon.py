"""A daemon whose file was broken after it started stays reachable: watched, drained, stopped.

The daemon (`serve`, on its control socket) runs on the configuration it loaded;
the CLI finds it by the link named after the file, says the file's problems
(file, key, fix) beside when the daemon loaded what it runs on, and does the
command. ``reload`` of the broken file changes nothing. Without a daemon, a broken
file is exit 4 as before.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gpuci_tui.cli import exitcodes
from gpuci_tui.cli.console_cmd import build_console
from gpuci_tui.cli.main import build_parser, main
from gpuci_tui.cli.reach import daemon_config, daemon_of
from gpuci_tui.core.host.supervision.group_supervisor import GroupSupervisor
from gpuci_tui.core.models import SlotState
from gpuci_tui.sim.runtime import DEFAULT_IMAGE
from tests.core.served_daemon import Daemon, served
from tests.core.supervisor_env import wait_until
from tests.ui.helpers import notes, screen_text
from tests.ui.helpers import wait_for as ui_wait

TEXT = f"""
[azure]
url = "http://127.0.0.1:9/reach"
pool = "gpu"

[agents]
count = 2
image = "{DEFAULT_IMAGE}"
name_prefix = "reach"
gpus = "none"
standby = false

[supervisor]
poll_interval = 0.2
"""
BROKEN = TEXT.replace("count = 2", 'count = "three"')


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[Daemon]:
    async with served(tmp_path / "config.toml", TEXT, idle) as running:
        yield running


def idle(sup: GroupSupervisor) -> bool:
    slots = sup.snapshot().slots
    return len(slots) == 2 and all(s.state == SlotState.IDLE for s in slots)


def says_the_problem(err: str) -> None:
    assert 'agents.count: must be a whole number from 1 to 64, got "three"' in err
    assert "the daemon runs on the configuration it loaded at " in err


async def test_status_drain_and_stop_work_under_a_broken_file_and_name_its_error(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.path.write_text(BROKEN, encoding="utf-8")

    assert await daemon.cli("status") == exitcodes.OK
    out, err = capsys.readouterr()
    assert "reach-0" in out and "reach-1" in out
    says_the_problem(err)

    assert await daemon.cli("status", "--json") == exitcodes.OK
    out, err = capsys.readouterr()
    snapshot = json.loads(out)
    assert any("agents.count" in w for w in snapshot["warnings"])
    says_the_problem(err)

    assert await daemon.cli("drain", "--all") == exitcodes.OK
    out, err = capsys.readouterr()
    assert "draining reach-0, reach-1" in out
    says_the_problem(err)
    await wait_until(
        lambda: all(s.state == SlotState.DRAINED for s in daemon.sup.snapshot().slots),
        timeout=20,
        what="both slots drained",
    )

    assert await daemon.cli("stop") == exitcodes.OK
    out, err = capsys.readouterr()
    assert "supervisor stopping" in out
    says_the_problem(err)
    assert daemon.task is not None
    assert await asyncio.wait_for(daemon.task, 15) == 0


async def test_reload_of_a_broken_file_changes_nothing_and_says_what_runs(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    loaded_at = daemon.sup.config_loaded_at
    daemon.path.write_text(BROKEN, encoding="utf-8")

    assert await daemon.cli("reload") == exitcodes.CONFIG
    err = capsys.readouterr().err
    says_the_problem(err)
    assert "nothing was reloaded: the daemon runs on the configuration it loaded at" in err

    assert await daemon.cli("reload", "--dry-run") == exitcodes.CONFIG
    out, err = capsys.readouterr()
    assert "the file has problems, nothing changed" in out and "agents.count" in out
    assert "nothing would be reloaded: the daemon runs on the configuration it loaded at" in err
    assert daemon.sup.config_loaded_at == loaded_at
    assert daemon.sup.config.agents.count == 2 and idle(daemon.sup)


async def test_a_deleted_file_still_reaches_the_daemon_started_from_it(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.path.unlink()
    assert await daemon.cli("status") == exitcodes.OK
    err = capsys.readouterr().err
    assert "no configuration file here" in err
    assert "the daemon runs on the configuration it loaded at" in err


def test_a_broken_file_without_a_daemon_is_exit_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(BROKEN, encoding="utf-8")
    for argv in (["status"], ["drain", "--all"], ["stop"], ["reload", "--dry-run"]):
        assert main(["--config", str(path), *argv]) == exitcodes.CONFIG
        err = capsys.readouterr().err
        assert "agents.count" in err and "the daemon runs on" not in err


async def test_the_console_opens_on_what_the_daemon_runs_and_shows_the_file_s_problem(
    daemon: Daemon,
) -> None:
    daemon.path.write_text(BROKEN, encoding="utf-8")
    args = build_parser().parse_args(["--config", str(daemon.path)])
    app = await asyncio.to_thread(build_console, args, False)
    async with app.run_test(size=(140, 40)) as pilot:
        await ui_wait(
            pilot,
            lambda: any("agents.count" in n and "loaded at" in n for n in notes(app)),
            timeout=20,
            what="the file's problem beside what the daemon runs",
        )
        await ui_wait(pilot, lambda: "reach-1" in screen_text(app), what="the daemon's agents")
        assert app.services.config is not None and app.services.config.agents.count == 2


async def test_the_console_opens_on_the_configuration_the_daemon_runs_on(daemon: Daemon) -> None:
    daemon.path.write_text(BROKEN, encoding="utf-8")
    args = argparse.Namespace(config=str(daemon.path))
    reached = await asyncio.to_thread(daemon_of, args, tell=False)
    assert reached.problem is not None and reached.problem.key == "agents.count"
    assert reached.loaded_at == daemon.sup.config_loaded_at
    config = await asyncio.to_thread(daemon_config, reached)
    assert config.agents == daemon.sup.config.agents
    assert config.path == daemon.path
