"""A dead container of another instance holds one of our lane names: a named problem, not a hang.

Another gpuci-tui instance with the same ``name_prefix`` (another organisation, pool
or state directory) left a dead container called like our slot 0's agent. The real
daemon (tests/real/rig.py) on the real Docker engine says so on the slot within one
poll, naming the container, the instance and state directory that made it, and the
fix, once in its log; it never removes it. After ``docker rm`` the slot serves.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.docker.agentspec import (
    LABEL_INSTANCE,
    LABEL_LANE,
    LABEL_PROJECT,
    LABEL_SLOT,
    LABEL_STATE_DIR,
    PROJECT,
)
from tests.real.rig import Rig, make_rig, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.daemon]

OTHER_INSTANCE = "0badc0ffee00"
OTHER_STATE = "/srv/other-gpuci/state"


@pytest.fixture
def rig(tmp_path: Path, docker_client: Any, emulator_image: str) -> Iterator[Rig]:
    yield from make_rig(tmp_path, docker_client, emulator_image, count=1, agents={"standby": False})


@pytest.fixture
def foreign(rig: Rig, docker_client: Any, busybox_image: str, run_label: str) -> Any:
    """The other instance's dead container, named like our slot 0's agent."""
    name = f"{rig.config.agents.name_prefix}-0"
    labels = {
        LABEL_PROJECT: PROJECT,
        LABEL_INSTANCE: OTHER_INSTANCE,
        LABEL_STATE_DIR: OTHER_STATE,
        LABEL_SLOT: "0",
        LABEL_LANE: "a",
        "gpuci.test": run_label,
    }
    container = docker_client.containers.run(busybox_image, ["true"], name=name, labels=labels,
                                             detach=True)  # fmt: skip
    container.wait(timeout=30)
    container.reload()
    assert container.status == "exited"
    return container


def test_a_foreign_dead_container_is_named_then_the_slot_serves_once_it_is_gone(
    rig: Rig, foreign: Any
) -> None:
    name = foreign.name
    rig.start_daemon()
    started = time.monotonic()

    def named() -> str:
        message = str(rig.slot(0).get("message") or "")
        return message if foreign.id[:12] in message else ""

    message = wait_for(named, 30, "the problem on the slot")
    took = time.monotonic() - started
    assert message == (
        f"the container name {name} is taken by dead container (exited) {foreign.id[:12]} of "
        f"another gpuci-tui instance ({OTHER_INSTANCE}, state directory {OTHER_STATE}); this "
        f"slot starts once it is gone: remove it (docker rm {name}), or give this daemon "
        "another name_prefix"
    )
    text = rig.cli("status").stdout
    assert f"{name}: the container name {name} is taken" in text
    # A few polls later: still there (never removed by us), said once in the log.
    wait_for(lambda: time.monotonic() - started > took + 3 * rig.config.supervisor.poll_interval,
             10, "three more polls")  # fmt: skip
    foreign.reload()
    assert foreign.status == "exited"
    assert rig.daemon_log().count(f"is taken by dead container (exited) {foreign.id[:12]}") == 1
    assert rig.slot(0)["failures"] == 0 and rig.slot(0)["state"] != "parked"

    foreign.remove()  # the operator's fix: docker rm NAME
    wait_for(rig.all_idle, 60, "the slot serving")
    assert rig.slot(0)["message"] == ""
    (ours,) = rig.containers()
    assert ours.attrs["Labels"][LABEL_INSTANCE] == rig.instance
    assert ours.attrs["Labels"][LABEL_STATE_DIR]  # whose it is, for the next operator
