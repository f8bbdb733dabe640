"""Host PID → Docker container id, from /proc/<pid>/cgroup."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuci_tui.core.docker.cgroups import (
    container_id_from_cgroup,
    container_id_of_pid,
    process_name,
)
from tests.waiting import wait_until

A = "3fbfa934d72fbc75f740dd3ee4d571b2afa23c8176de6ba941330fd6cd7f4e5c"
B = "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # cgroup v1, cgroupfs driver (what this test machine's engine uses)
        (f"12:memory:/docker/{A}\n11:pids:/docker/{A}\n0::/docker/{A}\n", A),
        # cgroup v1, systemd driver
        (
            f"9:memory:/system.slice/docker-{A}.scope\n1:name=systemd:/system.slice/docker-{A}.scope",
            A,
        ),
        # cgroup v2, systemd driver
        (f"0::/system.slice/docker-{A}.scope\n", A),
        # cgroup v2, cgroupfs driver
        (f"0::/docker/{A}\n", A),
        # rootless Docker under a user's systemd
        (f"0::/user.slice/user-1000.slice/user@1000.service/app.slice/docker-{A}.scope\n", A),
        # a process in a sub-cgroup of the container
        (f"0::/docker/{A}/init.scope\n", A),
        # Docker in Docker: the outer container is the one the host knows
        (f"0::/docker/{A}/docker/{B}\n", A),
        # host processes and other runtimes
        ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
        ("0::/\n", None),
        ("12:memory:/\n0::/init.scope\n", None),
        ("0::/system.slice/containerd.service\n", None),
        (f"0::/kubepods/burstable/pod1234/{A}\n", None),
        (f"0::/machine.slice/libpod-{A}.scope\n", None),
        # not a container id: too short, too long, upper case
        ("0::/docker/abc123\n", None),
        (f"0::/docker/{A}0\n", None),
        (f"0::/docker/{A.upper()}\n", None),
        # malformed lines are skipped, not fatal
        ("garbage\n\n", None),
        ("", None),
    ],
)
def test_container_id_from_cgroup(text: str, expected: str | None) -> None:
    assert container_id_from_cgroup(text) == expected


def test_pid_lookup_with_fake_proc(tmp_path: Path) -> None:
    (tmp_path / "77").mkdir()
    (tmp_path / "77" / "cgroup").write_text(f"0::/system.slice/docker-{B}.scope\n")
    (tmp_path / "77" / "comm").write_text("python3\n")
    assert container_id_of_pid(77, tmp_path) == B
    assert process_name(77, tmp_path) == "python3"
    assert container_id_of_pid(78, tmp_path) is None
    assert process_name(78, tmp_path) is None


def test_own_process_is_not_in_a_docker_container() -> None:
    assert container_id_of_pid(os.getpid()) is None
    assert process_name(os.getpid())  # e.g. "python" or "pytest"


@pytest.mark.docker
def test_real_container_pid_maps_to_its_id(docker_client, busybox_image, run_label) -> None:
    container = docker_client.containers.run(
        busybox_image,
        ["sleep", "30"],
        detach=True,
        network_mode="host",
        labels={"gpuci.test": run_label},
    )
    try:

        def reported_pid() -> int:
            container.reload()
            return int(container.attrs["State"]["Pid"])

        pid = wait_until(reported_pid, 10, "the container to report its PID")
        assert container_id_of_pid(pid) == container.id
        # Until runc's init execs the command, the PID is named runc:[2:INIT] (seen with
        # both cores busy): the name that lasts is the command's.
        wait_until(
            lambda: process_name(pid) == "sleep", 10, lambda: f"sleep, not {process_name(pid)!r}"
        )
    finally:
        container.remove(force=True)
