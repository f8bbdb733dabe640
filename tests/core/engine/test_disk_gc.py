"""The disk rules by table: the watermark state, the keep-set, the removal order, the pull refusal."""

from __future__ import annotations

import pytest

from gpuci_tui.core.engine.disk_gc import (
    Candidate,
    disk_state,
    keep_set,
    last_used,
    pull_refusal,
    removal_order,
)
from gpuci_tui.core.formatting import byte_size

GIB = 1024**3


@pytest.mark.parametrize(
    ("free", "min_free", "floor", "state"),
    [
        (None, 20 * GIB, GIB, "unknown"),
        (30 * GIB, 20 * GIB, GIB, "ok"),
        (20 * GIB, 20 * GIB, GIB, "ok"),
        (20 * GIB - 1, 20 * GIB, GIB, "low"),
        (GIB, 20 * GIB, GIB, "low"),
        (GIB - 1, 20 * GIB, GIB, "critical"),
        (GIB - 1, None, GIB, "critical"),
        (2 * GIB, None, GIB, "ok"),
    ],
)
def test_state(free: int | None, min_free: int | None, floor: int, state: str) -> None:
    assert disk_state(free, min_free, floor) == state


def test_pull_refusal_only_below_the_floor() -> None:
    assert pull_refusal("ok", 30 * GIB, GIB) is None
    assert pull_refusal("low", 3 * GIB, GIB) is None
    assert pull_refusal("unknown", None, GIB) is None
    assert pull_refusal("critical", GIB // 2, GIB) == (
        "no pull starts: Docker's data root has 512 MiB free, below the hard floor of "
        "1.0 GiB ([docker] hard_floor); free space with `docker image prune` or "
        "`docker builder prune`"
    )


def test_keep_set_joins_containers_configured_and_rollback_and_skips_absent() -> None:
    keep = keep_set(["sha256:a"], ["sha256:b", None], ["sha256:c", None])
    assert keep == {"sha256:a", "sha256:b", "sha256:c"}
    assert keep_set([], [None], []) == frozenset()


def test_removal_order_least_recently_used_first_never_a_kept_one() -> None:
    images = [
        Candidate("new", ("r/new:1",), GIB, 300.0),
        Candidate("old", ("r/old:1",), GIB, 100.0),
        Candidate("used", ("r/used:1",), GIB, 50.0),
        Candidate("big", ("r/big:1",), 5 * GIB, 200.0),
        Candidate("small", ("r/small:1",), GIB, 200.0),
    ]
    order = removal_order(images, frozenset({"used"}))
    assert [c.id for c in order] == ["old", "big", "small", "new"]


def test_last_use_is_the_later_of_creation_and_seen_in_use() -> None:
    assert last_used({"a": 100.0, "b": 200.0}, {"a": 500.0, "gone": 900.0}) == {
        "a": 500.0,
        "b": 200.0,
    }


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1536 * 1024, "2 MiB"),
        (1023 * 1024 * 1024, "1023 MiB"),
        (1024, "1 KiB"),
        (5 * GIB, "5.0 GiB"),
        (2 * 1024**4, "2.0 TiB"),
    ],
)
def test_byte_size(value: int, text: str) -> None:
    assert byte_size(value) == text
