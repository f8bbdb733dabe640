"""Job generators and the standalone `python -m gpuci_tui.sim.server`."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from gpuci_tui.sim.jobs import JobFeeder, queue_batch
from gpuci_tui.sim.org import SimOrg

from .conftest import PAT, wait_until

POOL = 42


def test_queue_batch_is_reproducible(org: SimOrg) -> None:
    ids = queue_batch(org, POOL, 10, duration=(1.0, 3.0), seed=7)
    durations = [org.job(i).duration for i in ids]
    assert len(ids) == 10 and all(1.0 <= d <= 3.0 for d in durations)
    other = SimOrg()
    other.add_pool("gpu")
    assert [
        other.job(i).duration for i in queue_batch(other, POOL, 10, (1.0, 3.0), seed=7)
    ] == durations
    assert all(org.job(i).state == "queued" for i in ids)


def test_feeder_queues_at_about_the_rate_and_stops(org: SimOrg) -> None:
    with JobFeeder(
        org, POOL, rate_per_min=1200, duration=(0.1, 0.2), seed=1, fail_share=0.5
    ) as feeder:
        wait_until(lambda: len(feeder.queued) >= 10, 5, "ten jobs")
    count = len(feeder.queued)
    assert {org.job(i).kind for i in feeder.queued} <= {"normal", "fail"}
    assert len(org.jobs()) == count  # nothing after stop
    with pytest.raises(ValueError, match="rate_per_min"):
        JobFeeder(org, POOL, 0)


def test_feeder_keeps_the_queue_bounded(org: SimOrg) -> None:
    with JobFeeder(org, POOL, rate_per_min=6000, seed=2, max_queued=3) as feeder:
        wait_until(lambda: len(feeder.queued) >= 3, 5, "three jobs")
        wait_until(lambda: feeder.skipped >= 3, 5, "arrivals beyond the bound")
    assert len(org.jobs()) == 3


def test_cli_prints_the_url_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    pat_file = tmp_path / "pat"
    pat_file.write_text(PAT + "\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuci_tui.sim.server", "--pat-file", str(pat_file), "--pool", "gpu",
         "--jobs-per-minute", "600", "--job-seconds", "1:2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        r = requests.get(
            f"{url}/_apis/distributedtask/pools?poolName=gpu", auth=("", PAT), timeout=5
        )
        assert r.json()["value"][0]["id"] == POOL

        def queued() -> int:
            jobs = requests.get(
                f"{url}/_apis/distributedtask/pools/42/jobrequests", auth=("", PAT), timeout=5
            )
            return int(jobs.json()["count"])

        wait_until(lambda: queued() > 0, 10, "the feeder to queue a job")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
        assert proc.stderr is not None and proc.stderr.read() == ""
    finally:
        proc.kill()
        proc.wait()


def test_cli_reports_a_missing_pat_file_plainly(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gpuci_tui.sim.server", "--pat-file", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "cannot read the PAT file" in result.stderr and "Traceback" not in result.stderr


def test_running_jobs_do_not_count_against_the_queue_bound(org: SimOrg) -> None:
    """The bound is on jobs that wait: jobs the agents already run keep the feeder going."""
    import dataclasses

    class Busy:
        """An org whose agents run 5 jobs; only what the feeder adds waits."""

        def __init__(self) -> None:
            self.running = [
                dataclasses.replace(org.job(org.queue_job(POOL)), assign_time=1.0) for _ in range(5)
            ]
            self.added: list[int] = []

        def job_requests(self, pool_id: int, **_: object) -> list[Any]:
            waiting = [org.job(i) for i in self.added]
            return [*self.running, *waiting]

        def queue_job(self, pool_id: int, *args: object, **kw: Any) -> int:
            self.added.append(org.queue_job(pool_id, *args, **kw))
            return self.added[-1]

    busy = Busy()
    with JobFeeder(busy, POOL, rate_per_min=6000, seed=3, max_queued=2) as feeder:  # type: ignore[arg-type]
        wait_until(lambda: feeder.skipped >= 2, 5, "arrivals beyond the bound")
    assert len(busy.added) == 2, "two may wait besides the five running"


def test_the_demo_offers_less_than_its_agents_can_take() -> None:
    from gpuci_tui.demo import DEMO_JOB_SECONDS, demo_job_rate

    mean = sum(DEMO_JOB_SECONDS) / 2
    for agents in (1, 4, 16):
        capacity_per_minute = agents * 60.0 / mean
        assert 0.5 * capacity_per_minute < demo_job_rate(agents) < capacity_per_minute
