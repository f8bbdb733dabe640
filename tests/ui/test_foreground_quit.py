"""``console --foreground`` closes its supervisor's assembly on quit: no history row is lost.

Issue 28: ``close_in_process`` was called only by tests, so when a foreground
console quit, the job recorder's rows still being written were dropped with the
event loop. The console now runs in a loop of its own and closes the assembly in
it (`console_cmd.run_until_closed`). Here a job finishes on the simulated
organisation, its row is still being written (a slow disk: the write takes a few
seconds), the operator quits at once, and the row is in the history after.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from gpuci_tui.app import make_app
from gpuci_tui.cli import console_cmd, run_cmd
from gpuci_tui.core.config.loader import Config, load_config
from gpuci_tui.core.config.paths import history_db_path
from gpuci_tui.core.host.handle import SupervisorHandle
from gpuci_tui.core.models import SlotState
from gpuci_tui.core.store.history import JobHistory, JobQuery, JobRecord
from gpuci_tui.screens.confirm import QuitChoice, QuitScreen
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.runtime import DEFAULT_IMAGE, SimulatedRuntime
from tests.core.supervisor_env import PAT, StaticTokens
from tests.ui.fakes import make_services

CONFIG = f"""
[azure]
url = "http://127.0.0.1:9/foreground"
pool = "gpu"

[agents]
image = "{DEFAULT_IMAGE}"
name_prefix = "fg"
count = 1
gpus = "none"
standby = false

[supervisor]
poll_interval = 0.2
"""
#: How long the history takes to write a row: the row is in flight that long.
WRITE_DELAY = 3.0
_ADD = JobHistory.add
#: The rows being written now (on the slow disk), by their request (None: not known yet).
WRITING: list[int | None] = []


def slow_add(self: JobHistory, record: JobRecord) -> int | None:
    """A history on a slow disk."""
    WRITING.append(record.request_id)
    time.sleep(WRITE_DELAY)
    return _ADD(self, record)


async def until(what: str, pred: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def test_quitting_a_foreground_console_writes_the_row_of_a_job_that_just_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    org = SimOrg(heartbeat_timeout=3.0)
    org.add_pat(PAT)
    pool_id = org.add_pool("gpu")
    api, runtime = SimPoolApi(org, PAT), SimulatedRuntime(org, destroy_delay=0.05)
    monkeypatch.setattr(JobHistory, "add", slow_add)
    monkeypatch.setattr(
        run_cmd, "real_services", lambda cfg, tokens=None: (api, runtime, StaticTokens())
    )
    path = tmp_path / "config.toml"
    path.write_text(CONFIG)
    config = load_config(path)

    async def start(cfg: Config) -> SupervisorHandle:
        return await console_cmd.foreground_supervisor(cfg, None, None, lambda message: None)

    app = make_app(
        make_services(config=config, config_path=path, start_supervisor=start, handle=None)
    )
    job: list[int] = []

    async def operator(pilot: Pilot[Any]) -> None:
        await until("the in-process supervisor", lambda: console_cmd._IN_PROCESS)
        parts = console_cmd._IN_PROCESS[0]
        slots = parts.supervisor.snapshot

        await until("an idle agent", lambda: [s.state for s in slots().slots] == [SlotState.IDLE])
        job.append(org.queue_job(pool_id, duration=0.2))
        # The job's row (the only job), not any step of the recorder: a pool read's step is
        # in flight too, and under load it came first, with the job still running at the quit.
        await until("the job's row in flight", lambda: WRITING)
        await pilot.press("q")
        await until("the quit dialog", lambda: isinstance(app.screen, QuitScreen))
        await pilot.press("l")  # leave the agents running: the supervisor stops, the console quits

    started = time.monotonic()
    assert console_cmd.run_until_closed(app, headless=True, auto_pilot=operator) is (
        QuitChoice.LEAVE_RUNNING
    )
    history = JobHistory(history_db_path())
    try:
        rows = history.query(JobQuery())
    finally:
        history.close()
    # The row is the host's: when its container ended before a read named its request, the
    # row waits for the request's view (the next daemon's reconciliation attaches it).
    assert len(rows) == 1, "the row in flight at quit was written"
    assert rows[0].request_id in (job[0], None)
    assert time.monotonic() - started >= WRITE_DELAY
    assert console_cmd._IN_PROCESS == []  # closed: the lock released, the history closed
