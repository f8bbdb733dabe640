"""The fleet console (Pilot) over a real sshd to a real daemon: a remote host's history comes
over ssh like its logs, a killed ssh link replays no event twice, and a killed SSH server reads
its cause from the first frame.

Each host is its own sshd on 127.0.0.1 in front of its own ``gpuci-tui run`` on
the real Docker engine (tests/fleet/sshlab.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
import pytest

from gpuci_tui.app import make_app
from gpuci_tui.core.config.fleet_host import parse_target
from gpuci_tui.core.fleet.link import LinkState
from gpuci_tui.core.fleet.ssh_command import SshSettings
from gpuci_tui.core.fleet.ssh_handle import SshHandle
from gpuci_tui.core.host.handle import Update
from gpuci_tui.core.models import SupervisorEvent
from gpuci_tui.core.store.history import JobQuery, JobRecord
from gpuci_tui.screens.fleet import FleetScreen
from gpuci_tui.screens.history import HistoryScreen
from tests.fleet.fakes import FAST, fleet_services, member
from tests.fleet.screen_helpers import open_host
from tests.fleet.sshlab import GPUCI, Host, SshLab, ssh_lab
from tests.fleet.test_fleet_ssh import leftover, until
from tests.real.rig import PAT
from tests.ui.helpers import screen_text, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.daemon, pytest.mark.sshd]


class CountingHandle(SshHandle):
    """An `SshHandle` that counts the events its streams bring (replays included)."""

    received = 0

    async def updates(self) -> AsyncIterator[Update]:
        async for update in super().updates():
            if isinstance(update, SupervisorEvent):
                self.received += 1
            yield update


@contextlib.contextmanager
def one_host(tmp_path: Path, docker_client: Any, image: str) -> Iterator[tuple[SshLab, Host, Path]]:
    """A lab with one host (daemon running, one agent) and a private ssh control directory."""
    control = Path(tempfile.mkdtemp(prefix="gpuci-ssh-", dir="/tmp"))
    try:
        with ssh_lab(tmp_path, docker_client, image) as lab:
            yield lab, lab.add_host("gpu-a", tmp_path, count=1), control
    finally:
        shutil.rmtree(control, ignore_errors=True)


def handle_for(lab: SshLab, host: Host, control: Path, **changes: Any) -> CountingHandle:
    settings = SshSettings(control_dir=control, ssh_config=str(lab.ssh_config), connect_timeout=5.0)
    return CountingHandle(parse_target(host.target, "x"), GPUCI, replace(settings, **changes))


async def closed(handle: SshHandle, control: Path) -> None:
    await handle.close()
    await until(
        lambda: leftover(control) is None, 10, "every channel closed", lambda: leftover(control)
    )


async def test_a_remote_hosts_history_comes_over_ssh_redacted_and_read_only(
    tmp_path: Path, docker_client: object, emulator_image: str
) -> None:
    with one_host(tmp_path, docker_client, emulator_image) as (lab, host, control):
        await asyncio.to_thread(host.start_daemon)
        # The pipeline's name carries the PAT: the history has it redacted, the answer too.
        host.rig.org.queue_job(host.rig.pool_id, pipeline=f"leak {PAT}", duration=1.0)
        watcher = handle_for(lab, host, control, readonly=True, control_dir=None)
        try:

            async def completed() -> list[JobRecord]:
                # The row is written at the container's end; a later read brings its result.
                rows = await watcher.history(JobQuery(limit=10))
                return rows if rows and rows[0].result else []

            rows = await until(completed, 120, "the finished job's row, with its result")
            assert rows[0].pipeline == "leak ***" and rows[0].result == "succeeded", rows
            assert all(PAT not in repr(row) for row in rows)
            assert await watcher.history(JobQuery(failed_only=True)) == []
        finally:
            await watcher.close()

        handle = handle_for(lab, host, control)
        app = make_app(fleet_services([member("gpu-a", host.target, handle)], backoff=FAST))
        try:
            async with app.run_test(size=(120, 36)) as pilot:
                await open_host(pilot, "gpu-a")
                await pilot.press("h")
                await wait_for(pilot, lambda: isinstance(app.screen, HistoryScreen), what="h")
                view = app.screen
                assert isinstance(view, HistoryScreen)
                await wait_for(pilot, lambda: bool(view.rows), timeout=60, what="the rows")
                assert view.rows[0].pipeline == "leak ***" and not view.problem
                assert view.table.border_title == "Finished jobs on gpu-a"
                assert "leak ***" in screen_text(app) and PAT not in screen_text(app)
        finally:
            await closed(handle, control)


async def test_a_killed_ssh_link_adds_no_event_twice_and_a_killed_sshd_reads_its_cause(
    tmp_path: Path, docker_client: object, emulator_image: str
) -> None:
    with one_host(tmp_path, docker_client, emulator_image) as (lab, host, control):
        await asyncio.to_thread(host.start_daemon)
        handle = handle_for(lab, host, control)
        app = make_app(fleet_services([member("gpu-a", host.target, handle)], backoff=FAST))
        try:
            async with app.run_test(size=(120, 36)) as pilot:
                screen = app.screen
                assert isinstance(screen, FleetScreen)
                log = screen.event_log

                def up() -> bool:
                    return screen.statuses[0].state is LinkState.UP

                await wait_for(pilot, lambda: up() and log.count >= 2, timeout=90, what="events")
                before = log.count

                # The ssh clients of this console die (SIGKILL): the link is lost and comes
                # back, and the daemon sends its recent events again.
                for proc in psutil.Process().children():
                    if proc.name() == "ssh":
                        proc.send_signal(signal.SIGKILL)
                received = handle.received
                await wait_for(pilot, lambda: not up(), timeout=30, what="the link lost")
                await wait_for(
                    pilot, lambda: up() and handle.received >= received + before, 60, "replayed"
                )
                # A job after the reconnect: its assignment is new, in its place by time.
                assigned = {
                    e.event.identity for e in log.events.entries if e.event.kind == "job_assigned"
                }
                host.rig.org.queue_job(host.rig.pool_id, pipeline="after the reconnect")

                def new_assignment() -> bool:
                    return any(
                        e.event.kind == "job_assigned" and e.event.identity not in assigned
                        for e in log.events.entries
                    )

                await wait_for(
                    pilot,
                    new_assignment,
                    timeout=90,
                    what="the new job's assignment",
                )
                await pilot.pause()
                entries = log.events.entries
                assert handle.received > len(entries), "the daemon did replay its events"
                identities = [entry.event.identity for entry in entries]
                assert len(set(identities)) == len(identities), "an event kept twice"
                assert len(log.lines) == len(entries) == log.count, "a line for each event, once"
                assert [e.event.at for e in entries] == sorted(e.event.at for e in entries)

                # The host's SSH server dies with its sessions: the row reads its cause at once.
                seen: list[str] = []

                def record() -> bool:
                    row = screen.rows.get(0)
                    words = "; ".join(row.problems) if row is not None else ""
                    if not seen or seen[-1] != words:
                        seen.append(words)
                    return screen.statuses[0].state is LinkState.DOWN and "refused" in words

                lab.kill_sshd(host)
                await wait_for(pilot, record, timeout=30, what="down with its cause")
                said = [words for words in seen if words]
                assert all("ssh ended" not in w and "exit 255" not in w for w in said), seen
                down = [w for w in said if w.startswith("unreachable")]
                assert down and "Connection refused" in down[0], seen
        finally:
            await closed(handle, control)
