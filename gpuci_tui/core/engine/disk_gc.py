"""Docker's disk: the watermark state and which images may go, least recently used first.

Pure rules (no I/O): the disk watch (`host.disk_watch`) reads the engine and
calls these. The keep-set is built from everything that needs an image: every
container's image (running or not: a stopped container's image cannot be removed
without force, and its tail may still be read), every configured image of every
group, and the rollback targets (each group's last roll-out's old image: a canary that
fails goes back to it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpuci_tui.core.formatting import byte_size

OK, LOW, CRITICAL, UNKNOWN = "ok", "low", "critical", "unknown"


def disk_state(free: int | None, min_free: int | None, hard_floor: int) -> str:
    """``critical`` below the hard floor, ``low`` below ``min_free``, else ``ok``."""
    if free is None:
        return UNKNOWN
    if free < hard_floor:
        return CRITICAL
    if min_free is not None and free < min_free:
        return LOW
    return OK


def pull_refusal(state: str, free: int | None, hard_floor: int) -> str | None:
    """Why no pull may start now (None: a pull may start)."""
    if state != CRITICAL or free is None:
        return None
    return (
        f"no pull starts: Docker's data root has {byte_size(free)} free, below the hard floor "
        f"of {byte_size(hard_floor)} ([docker] hard_floor); free space with `docker image "
        "prune` or `docker builder prune`"
    )


@dataclass(frozen=True)
class Candidate:
    """A local image as the removal order sees it."""

    id: str
    tags: tuple[str, ...]
    size: int
    last_used: float
    """The later of its creation time and the last time a container was seen using it."""


def keep_set(
    in_use: Iterable[str],
    configured: Iterable[str | None],
    rollback_targets: Iterable[str | None] = (),
) -> frozenset[str]:
    """The image ids that must stay: used by a container, configured, or a rollback target.

    ``configured`` and ``rollback_targets`` are the ids their references name locally
    (None where a reference names no local image: nothing to keep for it).
    """
    ids = [*in_use, *configured, *rollback_targets]
    return frozenset(i for i in ids if i)


def removal_order(images: Iterable[Candidate], keep: frozenset[str]) -> list[Candidate]:
    """The images that may be removed, least recently used first (largest first on a tie)."""
    return sorted(
        (image for image in images if image.id not in keep),
        key=lambda image: (image.last_used, -image.size, image.id),
    )


def last_used(created: Mapping[str, float], seen_in_use: Mapping[str, float]) -> dict[str, float]:
    """Each image's last use: the later of its creation and the last time it was seen in use."""
    return {i: max(t, seen_in_use.get(i, 0.0)) for i, t in created.items()}
