"""A real `gpuci-tui run` (real Docker, simulated organisation) under ``LimitNOFILE=256``,
flooded with 1,000 idle half-sent connections: on its metrics port by another local
user, then on its control socket by its owner.

Before: one thread per metrics connection; the daemon ran out of descriptors, Docker
calls failed with "Too many open files", `status` timed out and the log grew by
hundreds of MB. Now its descriptors and threads stay bounded, jobs still run and
slots are replenished, `status` answers and the log stays small.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config.loader import MetricsConfig, save_config
from gpuci_tui.core.config.paths import socket_path
from gpuci_tui.core.host.control.serving import MAX_CLIENTS
from tests.badinput.users import flood, local_user, open_fds, thread_count
from tests.real.rig import Rig, make_rig, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.daemon, pytest.mark.root]

LIMIT = 256
FLOOD = 1000


@pytest.fixture
def rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    yield from make_rig(tmp_path, docker_client, emulator_image)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Watch:
    """The highest descriptor and thread counts of a process, sampled while waiting."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.fds = 0
        self.threads = 0

    def sample(self) -> None:
        self.fds = max(self.fds, open_fds(self.pid))
        self.threads = max(self.threads, thread_count(self.pid))

    def until(self, pred: Any, timeout: float, what: str) -> Any:
        def check() -> Any:
            self.sample()
            return pred()

        return wait_for(check, timeout, what)


def job_runs_and_slot_refills(rig: Rig, watch: Watch) -> None:
    job = rig.org.queue_job(rig.pool_id, duration=0.5)
    watch.until(lambda: rig.org.job(job).result == "succeeded", 90, "a job done during the flood")
    watch.until(lambda: rig.all_idle(), 90, "the slots replenished during the flood")


def status_answers(rig: Rig, watch: Watch) -> None:
    watch.until(lambda: rig.cli("status").returncode == 0, 60, "`gpuci-tui status` answering")


def test_floods_on_both_servers_leave_the_daemon_supervising(rig: Rig) -> None:
    port = free_port()
    rig.config = dataclasses.replace(rig.config, metrics=MetricsConfig(f"127.0.0.1:{port}"))
    save_config(rig.config, rig.config_path)
    proc = rig.start_daemon(files_limit=LIMIT)
    wait_for(lambda: rig.all_idle(), 90, "two idle agents")
    base_fds, base_threads = open_fds(proc.pid), thread_count(proc.pid)
    watch = Watch(proc.pid)

    with local_user() as user, flood(f"127.0.0.1:{port}", FLOOD, user=user):
        job_runs_and_slot_refills(rig, watch)
        status_answers(rig, watch)
    with flood(str(socket_path(rig.instance)), FLOOD, fragment='{"op":"sta'):
        job_runs_and_slot_refills(rig, watch)
        status_answers(rig, watch)

    assert proc.poll() is None
    log = rig.daemon_log()
    print(f"fds {base_fds} -> max {watch.fds}, threads {base_threads} -> max {watch.threads}, "
          f"log {len(log.encode())} bytes")  # fmt: skip
    # A client costs at most one descriptor, and each server serves MAX_CLIENTS at once.
    assert watch.fds <= base_fds + 2 * MAX_CLIENTS + 16, (watch.fds, base_fds)
    assert watch.threads <= base_threads + 8, (watch.threads, base_threads)
    assert len(log.encode()) < 1 << 20, f"the log grew to {len(log)} bytes"
    assert "Too many open files" not in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    assert "open files limit: 256 (soft, was 256; hard 256)" in log


def test_run_lifts_its_soft_file_limit_to_the_hard_one_and_logs_the_figures(rig: Rig) -> None:
    proc = rig.start_daemon(files_limit=(256, 4096))
    limits = Path(f"/proc/{proc.pid}/limits").read_text()
    assert [ln.split()[3:5] for ln in limits.splitlines() if ln.startswith("Max open files")] == [
        ["4096", "4096"]
    ]
    assert "open files limit: 4096 (soft, was 256; hard 4096)" in rig.daemon_log()
