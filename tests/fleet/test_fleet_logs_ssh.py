"""A remote agent's output over a real sshd, through ``gpuci-tui bridge``, from a real daemon
on the real Docker engine: the PAT in the container's log arrives redacted."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest

from gpuci_tui.core.config.fleet_host import parse_target
from gpuci_tui.core.fleet.ssh_command import SshSettings
from gpuci_tui.core.fleet.ssh_handle import SshHandle
from gpuci_tui.core.models import SlotState
from tests.fleet.sshlab import GPUCI, ssh_lab
from tests.fleet.test_fleet_ssh import until
from tests.real.rig import PAT

pytestmark = [pytest.mark.docker, pytest.mark.daemon, pytest.mark.sshd]


async def test_logs_of_a_remote_agent_come_over_ssh_with_the_pat_redacted(
    tmp_path: Path, docker_client: object, emulator_image: str
) -> None:
    control = Path(tempfile.mkdtemp(prefix="gpuci-ssh-", dir="/tmp"))
    with ssh_lab(tmp_path, docker_client, emulator_image) as lab:
        host = lab.add_host("gpu-a", tmp_path, count=1)
        await asyncio.to_thread(host.start_daemon)
        settings = SshSettings(
            control_dir=control, ssh_config=str(lab.ssh_config), connect_timeout=5.0
        )
        handle = SshHandle(parse_target(host.target, "x"), GPUCI, settings)
        try:

            async def container() -> str | None:
                slots = (await handle.snapshot()).slots
                busy = [s for s in slots if s.state is SlotState.BUSY and s.container_id]
                return busy[0].container_id if busy else None

            # The job's pipeline name carries the PAT: the agent logs it when the job starts.
            host.rig.org.queue_job(host.rig.pool_id, pipeline=f"leak {PAT}", duration=60.0)
            busy = await until(container, 90, "the agent busy with the job")
            lines: list[str] = []

            async def started() -> bool:
                lines[:] = await handle.logs_tail(busy, 200)
                return any("started (leak" in line for line in lines)

            await until(started, 30, "the job's start in the container's log", lambda: lines)
            assert not any(PAT in line for line in lines), lines
            assert any("started (leak ***" in line for line in lines), lines
            # Only the daemon's own containers: another id reads nothing.
            assert await handle.logs_tail("0" * 64, 10) == []
        finally:
            await handle.close()
            shutil.rmtree(control, ignore_errors=True)
