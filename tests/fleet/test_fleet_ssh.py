"""The fleet over a real sshd to real daemons: two hosts, one dies (daemon, then SSH server), the
other keeps updating and taking commands, and the dead one comes back.

Each host is its own sshd on 127.0.0.1 with its own environment, in front of
its own ``gpuci-tui run`` on the real Docker engine (tests/fleet/sshlab.py).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
import pytest

from gpuci_tui.core.command_types import Drain, Resume
from gpuci_tui.core.config.fleet_host import parse_target
from gpuci_tui.core.fleet.link import FleetMember, HostLink, HostStatus, LinkState
from gpuci_tui.core.fleet.ssh_command import SshSettings
from gpuci_tui.core.fleet.ssh_handle import SshHandle
from gpuci_tui.core.host.control.reconnect import Backoff
from tests.fleet.sshlab import GPUCI, ssh_lab
from tests.waiting import wait_until_async

pytestmark = [pytest.mark.docker, pytest.mark.daemon, pytest.mark.sshd]


async def until(
    predicate: Callable[[], Any], timeout: float, what: str, detail: Callable[[], Any] = str
) -> Any:
    """`tests.waiting.wait_until_async`, saying ``detail()`` when it fails."""
    return await wait_until_async(predicate, timeout, lambda: f"{what}: {detail()}", every=0.1)


def leftover(control: Path) -> tuple[list[Any], list[Any], list[Path]] | None:
    """ssh clients, bridges (under the lab's sshd) and connection masters still there."""
    ours = []
    for proc in psutil.Process().children(recursive=True):
        try:
            ours.append((proc.name(), proc.cmdline()))
        except psutil.Error:
            continue  # ended since the listing (or a zombie): it holds nothing
    clients = [cmdline for name, cmdline in ours if name == "ssh"]
    bridges = [cmdline for _, cmdline in ours if "bridge" in cmdline]
    masters = list(control.iterdir())
    found = (clients, bridges, masters)
    return found if found != ([], [], []) else None


def in_thread(call: Callable[[], Any]) -> Callable[[], Any]:
    return lambda: asyncio.to_thread(call)


async def test_two_hosts_over_ssh_one_dies_and_comes_back(
    tmp_path: Path, docker_client: object, emulator_image: str
) -> None:
    control = Path(tempfile.mkdtemp(prefix="gpuci-ssh-", dir="/tmp"))
    with ssh_lab(tmp_path, docker_client, emulator_image) as lab:
        a = lab.add_host("gpu-a", tmp_path, count=1)
        b = lab.add_host("gpu-b", tmp_path, count=1)
        await asyncio.gather(asyncio.to_thread(a.start_daemon), asyncio.to_thread(b.start_daemon))
        settings = SshSettings(
            control_dir=control, ssh_config=str(lab.ssh_config), connect_timeout=5.0
        )
        handles = {h.name: SshHandle(parse_target(h.target, "x"), GPUCI, settings) for h in (a, b)}
        status: dict[str, HostStatus] = {}
        links = [
            HostLink(
                FleetMember(name, handle.host, handle),
                lambda s, name=name: status.__setitem__(name, s),
                clock=time.time,
                backoff=Backoff(base=0.5, cap=2.0),
            )
            for name, handle in handles.items()
        ]
        tasks = [asyncio.get_running_loop().create_task(link.run()) for link in links]

        def seen() -> str:
            return "; ".join(
                f"{n}: {s.state} {s.problem!r} "
                f"{[(x.state.value, x.message, x.last_exit) for x in s.snapshot.slots] if s.snapshot else None}"
                for n, s in status.items()
            )

        def idle(name: str) -> bool:
            s = status.get(name)
            return (
                s is not None
                and s.state is LinkState.UP
                and s.snapshot is not None
                and [x.state for x in s.snapshot.slots] == ["idle"]
            )

        try:
            await until(lambda: idle("gpu-a") and idle("gpu-b"), 90, "both hosts up and idle", seen)
            # Each host is its own daemon: its own organisation, its own agents.
            snaps = {n: status[n].snapshot for n in status}
            assert snaps["gpu-a"].instance != snaps["gpu-b"].instance  # type: ignore[union-attr]
            assert snaps["gpu-a"].org_url != snaps["gpu-b"].org_url  # type: ignore[union-attr]
            # One connection master per host carries the stream and the requests.
            assert (await handles["gpu-b"].hello())["ok"]
            assert len(os.listdir(control)) == 2
            # A read-only console's bridges refuse commands themselves (defence in depth).
            # Its own connection: closing a handle closes its connection master.
            watcher_settings = replace(settings, readonly=True, control_dir=None)
            watcher = SshHandle(parse_target(a.target, "x"), GPUCI, watcher_settings)
            try:
                refused = await watcher.send(Drain(slots=None))
            finally:
                await watcher.close()
            assert not refused.ok and "read-only" in refused.message, refused
            assert status["gpu-a"].state is LinkState.UP

            # --- host B's daemon dies: B is unreachable, A keeps updating and taking commands.
            b.kill_daemon()
            await until(
                lambda: (
                    status["gpu-b"].state is LinkState.DOWN
                    and "no gpuci-tui daemon is running on this host" in status["gpu-b"].problem
                ),
                30,
                "gpu-b down, with the bridge's reason",
            )
            preview = await handles["gpu-a"].preview(Drain(slots=None))
            assert [e.effect for e in preview.effects] == ["stop_now"]
            result = await handles["gpu-a"].send(Drain(slots=None))
            assert result.ok, result.message
            await until(
                lambda: (
                    status["gpu-a"].snapshot is not None
                    and [x.state for x in status["gpu-a"].snapshot.slots] == ["drained"]
                ),
                60,
                "gpu-a's drain seen through its update stream",
            )
            assert status["gpu-a"].state is LinkState.UP
            assert status["gpu-b"].state is LinkState.DOWN

            # --- the daemon comes back: B reconnects by itself.
            await asyncio.to_thread(b.start_daemon)
            await until(lambda: idle("gpu-b"), 60, "gpu-b back")

            # --- host A's SSH server dies with its sessions: an ssh-level failure.
            lab.kill_sshd(a)
            await until(
                lambda: (
                    status["gpu-a"].state is LinkState.DOWN
                    and "Connection refused" in status["gpu-a"].problem
                ),
                30,
                "gpu-a unreachable over ssh",
            )
            assert (await handles["gpu-b"].send(Resume(slots=None))).ok  # B still answers
            assert status["gpu-b"].state is LinkState.UP
            lab.start_sshd(a)
            await until(lambda: status["gpu-a"].state is LinkState.UP, 30, "gpu-a back over ssh")
            assert (await handles["gpu-a"].send(Resume(slots=None))).ok
            await until(in_thread(lambda: a.states() == ["idle"]), 60, "gpu-a resumed")
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.gather(*(h.close() for h in handles.values()))
            try:  # ssh clients, the bridges behind them and the masters all end
                await until(
                    lambda: leftover(control) is None, 10, "every channel closed",
                    lambda: leftover(control),
                )  # fmt: skip
            finally:
                shutil.rmtree(control, ignore_errors=True)
