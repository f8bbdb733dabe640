"""Logs of a fleet host's agents: served by its daemon for its own containers only, redacted,
bounded in size and pace, and followed in the host's dashboard with ``l``."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuci_tui.app import make_app
from gpuci_tui.core.fleet.link import LinkState
from gpuci_tui.core.host.control.log_serving import (
    MAX_BYTES,
    MAX_LINE_CHARS,
    MAX_TAIL,
    MIN_INTERVAL,
    bounded,
    logs_answer,
)
from gpuci_tui.core.host.control.server import ControlServer
from gpuci_tui.core.secrets.redaction import register_secret
from gpuci_tui.screens.fleet import FleetScreen
from gpuci_tui.screens.fleet_host import HostDashboardScreen
from gpuci_tui.screens.logs import LogScreen
from tests.fleet.fakes import FAST, SwitchHandle, fleet_services, healthy_snapshot, member
from tests.ui.helpers import wait_for

PAT = "logpat" + uuid.uuid4().hex + uuid.uuid4().hex[:16]
register_secret(PAT)


def test_lines_are_redacted_cut_and_bounded() -> None:
    lines = [f"line {i}" for i in range(2 * MAX_TAIL)] + [f"token={PAT}", "x" * 10_000]
    out = bounded(lines, MAX_TAIL)
    assert len(out) == MAX_TAIL and out[-2] == "token=***"
    assert len(out[-1]) == MAX_LINE_CHARS and out[-1].endswith("…")
    assert PAT not in "".join(out)
    big = bounded(["y" * (MAX_LINE_CHARS - 1)] * MAX_TAIL, MAX_TAIL)
    assert sum(len(line) + 1 for line in big) <= MAX_BYTES and big


def test_only_the_daemons_own_containers_are_read() -> None:
    snapshot = healthy_snapshot()
    own = snapshot.slots[0].container_id
    assert own is not None
    asked: list[tuple[str, int]] = []

    def tail(container: str, lines: int) -> list[str]:
        asked.append((container, lines))
        return [f"pat {PAT}"]

    ok = asyncio.run(logs_answer({"container": own, "tail": 10_000}, snapshot, tail))
    assert ok == {"ok": True, "lines": ["pat ***"]} and asked == [(own, MAX_TAIL)]
    other = asyncio.run(logs_answer({"container": "f00d" * 16}, snapshot, tail))
    assert other["lines"] == [] and len(asked) == 1, "another container is never read"
    assert not asyncio.run(logs_answer({"container": own, "tail": "x"}, snapshot, tail))["ok"]
    assert not asyncio.run(logs_answer({"container": own}, snapshot, None))["ok"]


class LoggingHandle(SwitchHandle):
    """A host whose daemon serves logs (as `SshHandle.logs_tail` does)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.output = ["booting", "job 7 started (train - main)", "token=***"]
        self.asked: list[str] = []

    async def logs_tail(self, container_id: str, lines: int) -> list[str]:
        self.asked.append(container_id)
        return list(self.output)


async def test_l_on_a_remote_agent_follows_its_output() -> None:
    handle = LoggingHandle(healthy_snapshot())
    services = fleet_services(
        [member("gpu-node-a.example.com", "gpu-node-a.example.com", handle)], backoff=FAST
    )
    services = replace(services, log_interval=0.05)
    app = make_app(services)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        await wait_for(pilot, lambda: screen.statuses[0].state is LinkState.UP, what="up")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, HostDashboardScreen), what="drill")
        dash = app.screen
        await wait_for(pilot, lambda: dash.snapshot is not None, what="snapshot")
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LogScreen), what="the log view")
        logs = app.screen
        assert isinstance(logs, LogScreen)
        await wait_for(
            pilot, lambda: "job 7 started" in "\n".join(logs.log_view.lines), what="the lines"
        )
        assert handle.asked[0] == healthy_snapshot().slots[0].container_id
        handle.output = [*handle.output, "step 2"]
        await wait_for(pilot, lambda: logs.log_view.lines[-1] == "step 2", what="followed")
        await pilot.press("q")
        await wait_for(pilot, lambda: app.screen is dash, what="back to the host")


class _Snapshots:
    """Just enough of a supervisor for ``logs`` requests."""

    instance = "stub"

    def snapshot(self) -> Any:
        return healthy_snapshot()


async def test_answers_are_paced_per_connection_and_redacted(tmp_path: Path) -> None:
    """However fast a console asks, one answer per interval on one connection."""
    own = healthy_snapshot().slots[0].container_id
    server = ControlServer(
        _Snapshots(),  # type: ignore[arg-type]
        Path(tempfile.mkdtemp(prefix="gpuci-lg-", dir="/tmp")) / "c.sock",
        logs_tail=lambda container, lines: [f"pat {PAT}"],
    )
    await server.start()
    try:
        reader, writer = await asyncio.open_unix_connection(str(server.path))
        started = time.monotonic()
        for _ in range(3):
            writer.write(json.dumps({"op": "logs", "container": own}).encode() + b"\n")
        await writer.drain()
        replies = [json.loads(await reader.readline()) for _ in range(3)]
        took = time.monotonic() - started
        writer.close()
        assert replies == [{"ok": True, "lines": ["pat ***"]}] * 3
        assert took >= 2 * MIN_INTERVAL * 0.9, took
    finally:
        await server.close()
        shutil.rmtree(server.path.parent, ignore_errors=True)
