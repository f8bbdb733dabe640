"""The executor always answers a removal and a log read: the engine waits on both for the name."""

from __future__ import annotations

from typing import Any

from gpuci_tui.core.engine.lifecycle import Lane
from gpuci_tui.core.engine.steps import FetchLogs, LogTail, RemoveContainer, Removed
from gpuci_tui.core.errors import RuntimeUnavailableError
from gpuci_tui.core.host.supervision.executor import Executor
from tests.core.supervisor_env import StaticTokens, make_env


class Refusing:
    """A runtime whose engine refuses every call."""

    def remove(self, container_id: str) -> None:
        raise RuntimeUnavailableError("Cannot connect to the Docker daemon")

    def logs_tail(self, container_id: str, lines: int = 20) -> list[str]:
        raise OSError("connection reset")


def executor(runtime: Any) -> Executor:
    env = make_env()
    return Executor(
        env.config,
        api=env.api,
        runtime=runtime,
        tokens=StaticTokens(),
        pool=None,  # type: ignore[arg-type]
        clock=lambda: 42.0,
    )


async def test_a_failed_removal_is_answered_with_its_reason() -> None:
    answer = await executor(Refusing()).run(RemoveContainer(0, Lane.A, "c1"))
    assert answer == Removed(0, Lane.A, "c1", "Cannot connect to the Docker daemon", 42.0)


async def test_a_removal_answers_without_error_once_the_container_is_gone() -> None:
    env = make_env()
    answer = await executor(env.runtime).run(RemoveContainer(0, Lane.A, "unknown"))
    assert answer == Removed(0, Lane.A, "unknown")


async def test_an_unreadable_tail_is_answered_empty() -> None:
    answer = await executor(Refusing()).run(FetchLogs(0, "c1"))
    assert answer == LogTail(0, "c1", ())
