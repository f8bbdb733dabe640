"""The slot rules: what counts as a failure, backoff, parking."""

from __future__ import annotations

import pytest

from gpuci_tui.core.config import SupervisorConfig
from gpuci_tui.core.models import SlotState
from gpuci_tui.core.slots import SlotRecord

RULES = SupervisorConfig()


def started(at: float = 100.0) -> SlotRecord:
    rec = SlotRecord(slot=0, name="host-0")
    rec.container_started("c" * 64, at, by_us=True)
    return rec


@pytest.mark.parametrize(
    ("code", "failure", "reason"),
    [
        (1, True, "exit code 1: agent stopped with an error (see the log tail)"),
        (
            10,
            True,
            "exit code 10: agent registration failed: check the PAT, its scope, the pool and the URL",
        ),
        (137, True, "exit code 137: killed (SIGKILL: stop timeout or out of memory)"),
        (143, False, "exit code 143: stopped (SIGTERM); a running job was cancelled"),
        (0, False, "exited 0"),
        (None, False, "gone while the Docker engine was unreachable (exit code unknown)"),
    ],
)
def test_what_counts_as_a_failure(code: int | None, failure: bool, reason: str) -> None:
    rec = started()
    info, was_failure = rec.exited(code, 101.0, RULES)
    assert was_failure is failure
    assert info.reason == reason
    assert (rec.failures == 1) is failure


def test_a_job_taken_is_never_a_failure() -> None:
    rec = started()
    rec.took_job = True
    info, failure = rec.exited(1, 101.0, RULES)
    assert not failure
    assert info.took_job


def test_backoff_doubles_then_parks_with_the_reason() -> None:
    rec = started()
    delays = []
    now = 100.0
    for _ in range(RULES.park_after):
        rec.exited(1, now, RULES)
        if rec.parked:
            break
        assert rec.backoff_until is not None
        delays.append(rec.backoff_until - now)
        now = rec.backoff_until
        rec.container_started("d" * 64, now, by_us=True)
    assert delays == [2.0, 4.0, 8.0, 16.0]
    assert rec.parked
    assert rec.state(now) is SlotState.PARKED
    assert (
        rec.message
        == "parked after 5 failed starts: exit code 1: agent stopped with an error (see the log tail)"
    )


def test_our_own_stop_is_not_a_failure_and_drain_ends_drained() -> None:
    rec = started()
    rec.drain = True
    rec.stop_requested = True
    info, failure = rec.exited(143, 101.0, RULES)
    assert not failure
    assert info.reason == "stopped by gpuci-tui"
    assert rec.drained
    assert rec.state(102.0) is SlotState.DRAINED
