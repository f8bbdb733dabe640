"""``gpuci-tui reload`` and SIGHUP against a daemon (`serve`) on its control socket.

The roll-out inside a group (`Supervisor.reconfigure`) is a recording test double
(`tests.core.reload_double`): here the command's path, the answer's words, the
groups added and removed, and a bad file that changes nothing.
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gpuci_tui.cli import exitcodes
from gpuci_tui.core.host.supervision.group_supervisor import GroupSupervisor
from gpuci_tui.core.models import SlotState
from tests.core.reload_double import Recorded, two_groups
from tests.core.served_daemon import Daemon, served
from tests.core.supervisor_env import wait_until

TEXT = two_groups("http://127.0.0.1:9/reload", "rl")
NEW = (
    TEXT.replace("[groups.a]\ncount = 1", '[groups.a]\ncount = 1\nimage = "repo/agent:v2"')
    .replace("[groups.b]\ncount = 1\n", "[groups.c]\ncount = 1\n")
    .replace("[supervisor]", '[metrics]\nlisten = "127.0.0.1:9464"\n\n[supervisor]')
)


@pytest.fixture
async def daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Daemon]:
    Recorded(monkeypatch)
    ready = functools.partial(idle, keys={"a/0", "b/0"})
    async with served(tmp_path / "config.toml", TEXT, ready) as running:
        yield running


def idle(sup: GroupSupervisor, keys: set[str]) -> bool:
    slots = sup.snapshot().slots
    return {s.key for s in slots} == keys and all(s.state == SlotState.IDLE for s in slots)


async def test_reload_dry_run_then_reload_over_the_socket(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.path.write_text(NEW, encoding="utf-8")
    assert await daemon.cli("reload", "--dry-run", "--canary", "1") == exitcodes.OK
    out = capsys.readouterr().out
    assert 'groups.a.image: "gpuci-sim/agent:1" -> "repo/agent:v2"' in out
    assert "    slot 0: replaced now with repo/agent:v2" in out  # the group's own preview
    assert "group b: removed: 1 slot drains; no job is killed" in out
    assert "group c: added: 1 slot starts" in out
    assert "metrics.listen" in out and "a restart is needed (the metrics endpoint" in out
    assert set(daemon.sup.children) == {"a", "b"}  # a dry run changes nothing

    # The file now names another instance (groups changed): the CLI finds the daemon
    # by the link named after the file.
    assert await daemon.cli("reload") == exitcodes.OK
    assert "reloaded" in capsys.readouterr().out
    await wait_until(lambda: idle(daemon.sup, {"a/0", "c/0"}), timeout=20, what="b out, c in")
    # ... and the other commands with the new file, by the link named after its instance.
    assert await daemon.cli("status") == exitcodes.OK
    assert "c/0" in capsys.readouterr().out
    # b again: the lock the daemon took for it at start is its own, not another daemon's.
    daemon.path.write_text(TEXT, encoding="utf-8")
    assert await daemon.cli("reload") == exitcodes.OK, capsys.readouterr().err
    await wait_until(lambda: idle(daemon.sup, {"a/0", "b/0"}), timeout=20, what="b back")


async def test_a_bad_file_is_refused_and_the_daemon_keeps_running(
    daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon.path.write_text(TEXT.replace("count = 1", "count = 0", 1), encoding="utf-8")
    assert await daemon.cli("reload") == exitcodes.CONFIG
    err = capsys.readouterr().err
    assert "groups.a.count" in err
    assert "nothing was reloaded: the daemon runs on the configuration it loaded" in err
    assert set(daemon.sup.children) == {"a", "b"}
    assert await daemon.cli("reload", "--canary", "-1") == exitcodes.USAGE


async def test_sighup_reloads(daemon: Daemon) -> None:
    daemon.path.write_text(NEW, encoding="utf-8")
    os.kill(os.getpid(), signal.SIGHUP)  # the daemon's loop is this test's loop
    await wait_until(lambda: set(daemon.sup.children) >= {"c"}, what="reloaded on SIGHUP")
    messages = [e.message for e in daemon.sup.events if e.kind == "reload"]
    assert messages[0] == f"SIGHUP: reading {daemon.path} again"
    assert messages[1].startswith("reload: added c; removed b")
