"""A busy agent SIGKILLed under its job: a job lost on that slot, not a start-up failure.

The real daemon (tests/real/rig.py), the emulator image on the real Docker engine:
once the console shows the slot busy with job N, its container is killed with
SIGKILL (``docker kill``, as an operator or the OOM-free kernel would). The slot's
last exit says "killed during job N", the history row is ``abandoned``, nothing
counts towards parking, and the slot serves the next job.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real.rig import Rig, assert_jobs_clean, make_rig, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.daemon]


@pytest.fixture
def rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    yield from make_rig(tmp_path, docker_client, emulator_image, count=1)


def test_a_job_killed_under_its_agent_is_lost_not_a_failure(rig: Rig) -> None:
    rig.start_daemon()
    wait_for(rig.all_idle, 60, "an idle agent and its standby")
    job = rig.org.queue_job(rig.pool_id, duration=60.0)
    busy = wait_for(
        lambda: (rig.slot(0).get("job") or {}).get("request_id") == job and rig.slot(0),
        30,
        "the slot busy with the job",
    )
    victim = busy["container_id"]
    rig.client.containers.get(victim).kill()  # SIGKILL

    def lost() -> dict[str, Any] | None:
        last = rig.slot(0).get("last_exit") or {}
        return last if last.get("lost_job") else None

    last = wait_for(lost, 30, "the lost job in the status")
    assert last["reason"] == f"killed during job {job} (SIGKILL; the job is lost)"
    assert (last["code"], last["took_job"]) == (137, True)
    slot = rig.slot(0)
    assert (slot["failures"], slot["backoff_until"], slot["state"]) == (0, None, slot["state"])
    assert slot["state"] != "parked"
    assert f"killed during job {job}" in rig.cli("status").stdout

    def row() -> dict[str, Any] | None:
        out = rig.cli("history", "--json")
        rows = json.loads(out.stdout) if out.returncode == 0 else []
        return next((r for r in rows if r.get("request_id") == job), None)

    found = wait_for(row, 30, "the job's history row")
    assert found["result"] == "abandoned", found
    assert found["reason"].startswith(f"killed during job {job}")
    # The slot serves again, and the organisation itself abandoned the lost job.
    wait_for(rig.all_idle, 60, "the slot refilled")
    jobs = [rig.org.queue_job(rig.pool_id, duration=0.3)]
    wait_for(lambda: rig.org.job(jobs[0]).result, 30, "the next job")
    assert_jobs_clean(rig.org, jobs)
    assert rig.org.job(job).result == "abandoned"
    assert rig.slot(0)["failures"] == 0
