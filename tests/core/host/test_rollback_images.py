"""The disk watch keeps the image a roll-back may return to (each group's last roll-out's old image)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from gpuci_tui.core.engine.rollout.state import Phase, Rollout
from gpuci_tui.core.host.assemble import rollback_images


def group(rollout: Rollout | None) -> Any:
    return SimpleNamespace(state=SimpleNamespace(rollout=rollout))


def test_the_old_image_of_each_groups_last_rollout_is_kept() -> None:
    canary = Rollout("s1", "s2", "agent:v1", "agent:v2", Phase.CANARY)
    done = Rollout("s3", "s4", "other:v7", "other:v8", Phase.DONE)
    supervisor: Any = SimpleNamespace(
        children={"a": group(canary), "b": group(done), "c": group(None)}
    )
    assert rollback_images(supervisor) == ["agent:v1", "other:v7"]


def test_nothing_before_the_supervisor_exists() -> None:
    assert rollback_images(None) == []
