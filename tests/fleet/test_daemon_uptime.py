"""The daemon's own uptime: carried by its snapshots, read on its clock, shown apart from the link's."""

from __future__ import annotations

import asyncio
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from gpuci_tui.core.config.loader import save_config
from gpuci_tui.core.config.paths import socket_path
from gpuci_tui.core.docker.agentspec import instance_id
from gpuci_tui.core.engine.snapshots import daemon_uptime
from gpuci_tui.core.fleet.link import HostStatus, LinkState
from gpuci_tui.core.fleet.rows import daemon_started, host_row
from gpuci_tui.core.host.control.client import request
from gpuci_tui.core.host.control.server import ControlServer
from gpuci_tui.core.models import SupervisorSnapshot
from gpuci_tui.core.wire import snapshot_from_dict, to_dict
from gpuci_tui.widgets.fleet_table import host_detail, uptimes
from tests.badinput.stubs import StubSupervisor
from tests.fleet.fakes import healthy_snapshot
from tests.fleet.test_ssh_handle import FAKE_SSH, handle_for
from tests.ui.scenarios import NOW, sample_config

DAY = 86_400.0

# --------------------------------------------------------------------------- the daemon's uptime


@pytest.mark.parametrize(
    ("started_at", "taken_at", "received_at", "expected"),
    [
        # Same clocks: the daemon started an hour before its snapshot was taken.
        (NOW - 3600, NOW, NOW, NOW - 3600),
        # The daemon's clock runs a day ahead: still an hour, on the console's clock.
        (NOW + DAY - 3600, NOW + DAY, NOW, NOW - 3600),
        # A day behind, and the snapshot arrived 5 s ago on a quiet daemon.
        (NOW - DAY - 3600, NOW - DAY, NOW - 5, NOW - 5 - 3600),
        (None, NOW, NOW, None),  # an old daemon (or one not started yet) says nothing
        (NOW + 60, NOW, NOW, None),  # its clock stepped back past its start
        (NOW - 3600, NOW, None, None),  # never received
    ],
)  # fmt: skip
def test_the_daemons_start_on_the_consoles_clock(
    started_at: float | None, taken_at: float, received_at: float | None, expected: float | None
) -> None:
    snapshot = replace(healthy_snapshot(), started_at=started_at, taken_at=taken_at)
    assert daemon_started(snapshot, received_at) == expected


def test_uptime_is_read_on_the_daemons_clock_alone() -> None:
    snapshot = replace(healthy_snapshot(), started_at=10.0, taken_at=130.0)
    assert daemon_uptime(snapshot) == 120.0
    assert daemon_uptime(replace(snapshot, started_at=None)) is None
    assert daemon_uptime(replace(snapshot, started_at=131.0)) is None


def test_the_wire_field_is_optional_for_old_daemons() -> None:
    data = to_dict(healthy_snapshot())
    assert data["started_at"] == NOW - 3600 and data["taken_at"] == NOW
    old = {key: value for key, value in data.items() if key != "started_at"}
    assert snapshot_from_dict(old).started_at is None


class StartedSupervisor(StubSupervisor):
    """A supervisor stand-in that has been running for 3 h on a clock a day ahead."""

    def snapshot(self) -> SupervisorSnapshot:
        return replace(super().snapshot(), mode="daemon", pid=27330, taken_at=NOW + DAY,
                       started_at=NOW + DAY - 3 * 3600)  # fmt: skip


async def test_status_subscribe_and_the_bridge_carry_the_daemons_start(tmp_path: Path) -> None:
    config = sample_config()
    path = tmp_path / "host.toml"
    save_config(config, path)
    ssh = tmp_path / "ssh"
    ssh.write_text(FAKE_SSH)
    ssh.chmod(ssh.stat().st_mode | stat.S_IXUSR)
    server = ControlServer(StartedSupervisor(), socket_path(instance_id(config)))  # type: ignore[arg-type]
    await server.start()
    handle = handle_for(path, str(ssh))
    try:
        # On the control socket itself: the status answer's snapshot has the field.
        reply = await asyncio.to_thread(request, server.path, {"op": "status"})
        assert reply["snapshot"]["started_at"] == NOW + DAY - 3 * 3600
        # Through ssh and `gpuci-tui bridge`: status and the subscription's first snapshot.
        assert (await handle.snapshot()).started_at == NOW + DAY - 3 * 3600
        stream = handle.updates()
        first = await asyncio.wait_for(anext(stream), 30)
        await stream.aclose()
        assert isinstance(first, SupervisorSnapshot)
        assert daemon_started(first, NOW) == NOW - 3 * 3600
    finally:
        await handle.close()
        await server.close()


def up_since(link_since: float, snapshot: object, received_at: float) -> HostStatus:
    return HostStatus(
        state=LinkState.UP, since=link_since, snapshot=snapshot, updated_at=received_at
    )  # type: ignore[arg-type]


def test_the_detail_line_names_the_daemons_age_and_the_links_apart() -> None:
    # The daemon has run for 3 h; the ssh link came up 95 s ago (it dropped once).
    snapshot = replace(healthy_snapshot(), started_at=NOW + DAY - 3 * 3600, taken_at=NOW + DAY)
    row = host_row("gpu3", "ci@gpu3", up_since(NOW - 95, snapshot, NOW))
    assert uptimes(row, NOW) == ["daemon pid 4321 up 3h00m", "link up 1m35s"]
    # Two minutes later, with no new snapshot: both ages went on with the console's clock.
    assert uptimes(row, NOW + 120) == ["daemon pid 4321 up 3h02m", "link up 3m35s"]
    assert "· daemon pid 4321 up 3h00m · link up 1m35s ·" in host_detail(row, NOW).plain


def test_a_daemon_that_does_not_send_its_start_shows_no_uptime() -> None:
    snapshot = replace(healthy_snapshot(), started_at=None)
    row = host_row("gpu3", "ci@gpu3", up_since(NOW - 95, snapshot, NOW))
    assert row.daemon_since is None
    assert uptimes(row, NOW) == ["daemon pid 4321", "link up 1m35s"]
    assert " up 1m35s" not in host_detail(row, NOW).plain.replace("link up 1m35s", "")


def test_a_down_host_claims_no_daemon_uptime() -> None:
    status = HostStatus(LinkState.DOWN, "refused", since=NOW - 30, snapshot=healthy_snapshot(),
                        updated_at=NOW - 40)  # fmt: skip
    row = host_row("gpu3", "ci@gpu3", status)
    assert row.daemon_since is None and "daemon pid" not in host_detail(row, NOW).plain


def test_the_queue_says_how_old_it_is_on_the_consoles_clock() -> None:
    """The daemon read its queue 25 s before its snapshot; its clock is a day ahead."""
    from gpuci_tui.core.fleet.rows import on_our_clock

    base = healthy_snapshot()
    snap = replace(
        base,
        taken_at=NOW + DAY,
        pool_summary=replace(base.pool_summary, queued_jobs=2, jobs_read_at=NOW + DAY - 25),
    )
    assert on_our_clock(snap, snap.pool_summary.jobs_read_at, NOW) == NOW - 25
    assert on_our_clock(snap, None, NOW) is None, "an old daemon: no age, not a made-up one"
    row = host_row(
        "gpu1", "gpu1", HostStatus(LinkState.UP, snapshot=snap, updated_at=NOW, since=NOW)
    )
    assert "queue 2 read 25 s ago" in host_detail(row, NOW).plain
