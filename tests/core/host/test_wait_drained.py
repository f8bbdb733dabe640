"""``drain --wait`` follows the daemon through control.py's subscribe client."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest

from gpuci_tui.cli import control_cmds, exitcodes
from gpuci_tui.core.command_types import Drain
from gpuci_tui.core.config.loader import load_config
from gpuci_tui.core.host.assemble import assemble
from gpuci_tui.core.host.control.client import ControlError
from gpuci_tui.core.host.control.server import ControlServer
from gpuci_tui.core.models import SlotState
from gpuci_tui.core.store.history import JobHistory
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.runtime import DEFAULT_IMAGE, SimulatedRuntime
from tests.core.supervisor_env import PAT, StaticTokens, wait_until

CONFIG = f"""
[azure]
url = "http://127.0.0.1:9/org"
pool = "gpu"

[agents]
image = "{DEFAULT_IMAGE}"
name_prefix = "box"
count = 2

[supervisor]
poll_interval = 0.5
"""


async def test_drain_wait_returns_once_every_slot_is_drained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    org = SimOrg(heartbeat_timeout=3.0)
    org.add_pat(PAT)
    org.add_pool("gpu")
    (tmp_path / "config.toml").write_text(CONFIG)
    config = load_config(tmp_path / "config.toml")
    parts = assemble(
        config,
        api=SimPoolApi(org, PAT),
        runtime=SimulatedRuntime(org, destroy_delay=0.05),
        tokens=StaticTokens(),
        history=JobHistory(":memory:"),
        mode="daemon",
    )
    sup = parts.supervisor
    sock = Path(tempfile.mkdtemp(prefix="gpuci-wait-", dir="/tmp")) / "control.sock"
    server = ControlServer(sup, sock)
    await server.start()
    task = asyncio.create_task(sup.run())
    try:
        await wait_until(
            lambda: [s.state for s in sup.snapshot().slots] == [SlotState.IDLE] * 2,
            timeout=20,
            what="two idle slots",
        )
        # Too short a wait for anything to drain: the timeout is reported.
        assert await asyncio.to_thread(control_cmds._wait_drained, sock, [Drain(None)], 0.01) == (
            exitcodes.FAILED
        )
        assert (await sup.execute(Drain(None))).ok
        code = await asyncio.to_thread(control_cmds._wait_drained, sock, [Drain(None)], 30)
        assert code == exitcodes.OK
        assert all(s.state == SlotState.DRAINED for s in sup.snapshot().slots)
        assert "drained: box-0, box-1" in capsys.readouterr().out
    finally:
        sup.request_stop()
        await asyncio.wait_for(task, 10)
        await server.close()
    # The daemon has gone: the wait says so instead of hanging (the CLI exits NO_DAEMON).
    with pytest.raises(ControlError, match="cannot attach"):
        await asyncio.to_thread(control_cmds._wait_drained, sock, [Drain(None)], 5)
