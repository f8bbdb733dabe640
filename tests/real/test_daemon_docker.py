"""`gpuci-tui run` as a real process, on the real Docker engine, against the simulated org.

Agent containers are the busybox emulator image (host network, reaching the
simulated organisation on 127.0.0.1); the PAT reaches the daemon through
GPUCI_PAT_FILE and the containers only as a token file.
"""

from __future__ import annotations

import json
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from gpuci_tui.core.config.paths import socket_path
from gpuci_tui.core.docker.agentspec import LABEL_INSTANCE
from tests.real.rig import PAT, Rig, make_rig, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.daemon]


@pytest.fixture
def rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    yield from make_rig(tmp_path, docker_client, emulator_image)


def test_fills_slots_and_refills_after_a_job(rig: Rig) -> None:
    rig.start_daemon()
    wait_for(rig.all_idle, what="two idle agents")
    before = {c.id for c in rig.containers()}
    assert len(before) == 2 * rig.lanes
    job = rig.org.queue_job(rig.pool_id, duration=0.5)
    wait_for(lambda: rig.org.job(job).result == "succeeded", what="the job")
    wait_for(
        lambda: (
            len(rig.containers()) == 2 * rig.lanes and {c.id for c in rig.containers()} != before
        ),
        what="refill",
    )
    assert rig.org.job(job).assign_count == 1


def test_sigkill_mid_job_then_restart_adopts_without_duplicates(rig: Rig) -> None:
    daemon = rig.start_daemon()
    wait_for(rig.all_idle)
    job = rig.org.queue_job(rig.pool_id, duration=8.0)
    wait_for(lambda: "busy" in rig.states(), what="a busy agent")
    busy = next(s for s in rig.status()["slots"] if s["state"] == "busy")  # type: ignore[index]
    os.kill(daemon.pid, signal.SIGKILL)
    daemon.wait(10)
    assert len(rig.containers()) == 2 * rig.lanes, "SIGKILL of the daemon must not touch agents"
    ids_before = {c.id for c in rig.containers()}
    rig.start_daemon()
    wait_for(lambda: rig.slot(busy["slot"])["state"] == "busy", what="busy agent adopted")
    assert rig.slot(busy["slot"])["container_id"] == busy["container_id"]
    assert {c.id for c in rig.containers()} == ids_before, "adoption must not start containers"
    wait_for(lambda: rig.org.job(job).result == "succeeded", timeout=30, what="the job")
    assert rig.org.job(job).assign_count == 1

    # One listing for both checks: the finished agent may still be listed as running for
    # a moment after its job succeeded, and a second listing could miss it.
    def listing() -> list[str] | None:
        names = sorted(c.attrs["Names"][0] for c in rig.containers())
        return names if len(names) == 2 * rig.lanes else None

    names = wait_for(listing, what="refill after the job")
    assert len(set(names)) == 2 * rig.lanes, f"duplicate slot containers: {names}"


def test_drain_with_busy_agent_lets_job_succeed_and_starts_nothing(rig: Rig) -> None:
    rig.start_daemon()
    wait_for(rig.all_idle)
    job = rig.org.queue_job(rig.pool_id, duration=3.0)
    wait_for(lambda: "busy" in rig.states())
    seen = {c.id for c in rig.containers()}
    out = rig.cli("drain", "--all", "--wait", "--timeout", "60", timeout=90)
    assert out.returncode == 0, out.stderr
    assert "drained" in out.stdout
    assert rig.org.job(job).result == "succeeded"
    assert rig.containers() == []
    assert {
        c.id
        for c in rig.client.containers.list(
            all=True, sparse=True, filters={"label": f"{LABEL_INSTANCE}={rig.instance}"}
        )
    } <= seen
    assert rig.states() == ["drained", "drained"]


def test_second_run_refuses_and_socket_is_private(rig: Rig) -> None:
    rig.start_daemon()
    out = rig.cli("run", timeout=30)
    assert out.returncode == 6
    assert "already supervises" in out.stderr
    sock = socket_path(rig.instance)
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600


def inspected_without_pat(rig: Rig) -> int:
    """Inspect every container of the instance (asserting no PAT); how many could be.

    One that is removed between the listing and its inspection is skipped: it holds
    nothing any more, and the caller waits until enough were inspected.
    """
    count = 0
    for c in rig.containers():
        try:
            details = rig.client.api.inspect_container(c.id)
        except docker.errors.NotFound:
            continue
        assert PAT not in json.dumps(details)
        count += 1
    return count


def test_pat_is_absent_from_inspect_argv_and_status(rig: Rig) -> None:
    daemon = rig.start_daemon()
    wait_for(rig.all_idle)
    job = rig.org.queue_job(rig.pool_id, duration=0.3)
    wait_for(lambda: rig.org.job(job).result == "succeeded")
    # Both slots idle with ready standbys lasts; "four containers" alone may include one
    # that is going away (then inspecting it is a race with its removal).
    wait_for(rig.all_idle, 60, "both slots refilled")
    wait_for(lambda: inspected_without_pat(rig) >= 4, 30, "four containers inspected")
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        assert PAT.encode() not in cmdline, f"PAT in argv of pid {proc.name}"
    try:
        environ = (Path("/proc") / str(daemon.pid) / "environ").read_bytes()
    except OSError:
        environ = b""
    assert PAT.encode() not in environ
    assert PAT not in rig.cli("status", "--json").stdout
    assert PAT not in rig.daemon_log()


def test_crash_looping_image_parks_with_reason_in_status(
    tmp_path: Path, docker_client: Any, broken_image: str
) -> None:
    for rig in make_rig(tmp_path, docker_client, broken_image):
        _check_parked(rig)


def _check_parked(rig: Rig) -> None:
    rig.start_daemon()
    wait_for(lambda: rig.states() == ["parked", "parked"], timeout=60, what="parked slots")
    slot = rig.slot(0)
    assert slot["failures"] == 3
    assert slot["last_exit"]["code"] == 1
    assert "parked after 3 failed starts" in slot["message"]
    text = rig.cli("status").stdout
    assert "parked" in text
    assert "exit code 1" in text


async def test_console_attaches_to_running_daemon_and_drains(rig: Rig, tmp_path: Path) -> None:
    """The attach path: the console renders the daemon's state and its keys reach it."""
    import asyncio

    from gpuci_tui.app import make_app
    from gpuci_tui.core.host.control.client import SocketHandle
    from gpuci_tui.services import Services
    from gpuci_tui.sim.gpu_synthetic import SyntheticSampler

    await asyncio.to_thread(rig.start_daemon)
    await asyncio.to_thread(wait_for, lambda: rig.states() == ["idle", "idle"])
    handle = SocketHandle(socket_path(rig.instance))
    services = Services(
        config=rig.config,
        config_path=rig.config_path,
        gpu=SyntheticSampler(gpus=1, seed=1),
        handle=handle,
    )
    app = make_app(services)
    async with app.run_test(size=(120, 36)) as pilot:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while "idle" not in _screen_text(app):
            assert loop.time() < deadline, "the console never showed the daemon's agents"
            await pilot.pause(0.1)
        assert "daemon" in _screen_text(app)
        await pilot.press("d")
        await pilot.pause(0.3)
        await pilot.press("y")
        await asyncio.to_thread(
            wait_for,
            lambda: rig.slot(0)["state"] == "drained",
            30,
            "slot 0 drained via the console",
        )
    await handle.close()
    assert rig.slot(1)["state"] in ("idle", "busy", "starting")


def _screen_text(app: Any) -> str:
    """What the app shows now (the SVG export carries every visible string)."""
    return str(app.export_screenshot())


def test_console_starts_a_detached_daemon_that_outlives_it(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No daemon running: the console starts one in its own session (survives SSH hangup)."""
    from gpuci_tui.cli.console_cmd import start_detached_daemon
    from gpuci_tui.core.host.control.client import request

    monkeypatch.setenv("GPUCI_PAT_FILE", rig.env["GPUCI_PAT_FILE"])
    handle = start_detached_daemon(rig.config_path, rig.config)
    hello = request(handle.path, {"op": "hello"})
    pid = int(hello["pid"])
    try:
        assert os.getsid(pid) == pid, "the daemon must lead its own session"
        assert os.getsid(pid) != os.getsid(0)
        wait_for(rig.all_idle, what="agents from the detached daemon")
    finally:
        out = rig.cli("stop")
        assert out.returncode == 0, out.stderr
        wait_for(lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid), 20, "daemon exit")
    assert len(rig.containers()) == 2 * rig.lanes, "stopping the daemon leaves agents running"


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def test_sigterm_stops_daemon_promptly_and_leaves_agents(rig: Rig) -> None:
    daemon = rig.start_daemon()
    wait_for(rig.all_idle)
    job = rig.org.queue_job(rig.pool_id, duration=3.0)
    wait_for(lambda: "busy" in rig.states())
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(15) == 0
    assert len(rig.containers()) == 2 * rig.lanes, (
        "SIGTERM must leave agents (and the running job) alone"
    )
    wait_for(lambda: rig.org.job(job).result == "succeeded", what="the job, unsupervised")
    assert not socket_path(rig.instance).exists(), "the socket is removed on exit"
