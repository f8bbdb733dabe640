"""The disk watch: free space of Docker's data root, and removal of unused images below ``min_free``.

Every ``[docker] check_interval`` seconds it reads the free space (one ``docker
info`` for the root, then ``statvfs``: cheap and bounded). Below ``min_free``
it removes the images nothing needs (`engine.disk_gc.keep_set`), least recently
used first, until the free space is back above ``min_free``, and prunes the
dangling build cache; each removal is an event. Below ``hard_floor`` it says
why no pull may start (`may_pull`): the pull code consults it.

Docker keeps no last-used time for images, so "least recently used" is the
later of an image's creation time and the last time this watch saw a container
using it (since the daemon started): an image a lane ran yesterday outlives an
older one nobody ran, and a freshly pulled or built image is not removed first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from gpuci_tui.core.engine.disk_gc import (
    CRITICAL,
    LOW,
    Candidate,
    disk_state,
    keep_set,
    last_used,
    pull_refusal,
    removal_order,
)
from gpuci_tui.core.formatting import byte_size
from gpuci_tui.core.models import DiskSnapshot
from gpuci_tui.core.protocols import DiskUsage, DockerDisk

log = logging.getLogger("gpuci_tui.disk")

#: At most this many images removed in one check: the next check goes on (bounded work).
MAX_REMOVALS_PER_CHECK = 50


class DiskWatch:
    """Reads Docker's free space and frees it when it falls below ``min_free``."""

    def __init__(
        self,
        disk: DockerDisk,
        *,
        min_free: int | None,
        hard_floor: int,
        interval: float,
        configured: Callable[[], Iterable[str]],
        report: Callable[[str, str], None],
        rollback_targets: Callable[[], Iterable[str]] = lambda: (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Watch ``disk``.

        Args:
            disk: the engine's disk side.
            min_free: bytes below which unused images are removed (None: never).
            hard_floor: bytes below which no pull starts.
            interval: seconds between two checks.
            configured: the image references of every group (kept).
            report: ``(kind, message)`` for events.
            rollback_targets: image references a roll-back may return to (kept).
            clock: the time source.
        """
        self.disk = disk
        self.min_free = min_free
        self.hard_floor = hard_floor
        self.interval = interval
        self.configured = configured
        self.report = report
        self.rollback_targets = rollback_targets
        self.clock = clock
        self.reading = DiskSnapshot(min_free_bytes=min_free, hard_floor_bytes=hard_floor)
        self._seen_in_use: dict[str, float] = {}
        # Events found in the worker thread, reported from the caller's (the loop's)
        # thread: the reporter's queues are not thread-safe.
        self._pending: list[tuple[str, str]] = []

    def may_pull(self) -> str | None:
        """Why no pull may start now (None: it may)."""
        r = self.reading
        return pull_refusal(r.state, r.free_bytes, r.hard_floor_bytes)

    async def run(self) -> None:
        """Check until cancelled."""
        while True:
            await asyncio.to_thread(self._check)
            self._flush()
            await asyncio.sleep(self.interval)

    def check(self) -> DiskSnapshot:
        """One check (blocking): read, free space when below ``min_free``, read again."""
        try:
            return self._check()
        finally:
            self._flush()

    def _note(self, kind: str, message: str) -> None:
        self._pending.append((kind, message))

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        for kind, message in pending:
            self.report(kind, message)

    def _check(self) -> DiskSnapshot:
        before = self.reading
        try:
            usage = self.disk.disk_usage()
        except Exception as exc:  # noqa: BLE001 - an engine failure is a reading, not a crash
            self.reading = replace(
                before, state="unknown", message=f"cannot read: {exc}", checked_at=self.clock()
            )
            return self.reading
        self._set(usage)
        if self.min_free is None:
            return self._changed(before)
        try:
            # At every check, not only when space is short: the last use it records
            # is what orders the removals (see the module docstring).
            self._note_in_use(self.disk.image_ids_in_use())
            if self.reading.state in (LOW, CRITICAL):
                self._free_space()
        except Exception as exc:  # noqa: BLE001 - the next check tries again
            log.warning("freeing Docker disk space failed: %s", exc)
            self._note("disk_gc_failed", f"freeing Docker disk space failed: {exc}")
        return self._changed(before)

    def _changed(self, before: DiskSnapshot) -> DiskSnapshot:
        first_bad = before.checked_at is None and self.reading.state in (LOW, CRITICAL)
        if self.reading.state != before.state and (before.checked_at is not None or first_bad):
            self._note("disk", f"Docker disk {self.reading.state}: {self.reading.message}")
        return self.reading

    def _note_in_use(self, in_use: set[str]) -> set[str]:
        now = self.clock()
        for image_id in in_use:
            self._seen_in_use[image_id] = now
        return in_use

    def _set(self, usage: DiskUsage) -> None:
        state = disk_state(usage.free_bytes, self.min_free, self.hard_floor)
        if usage.free_bytes is None:
            message = f"free space of {usage.root or 'the data root'} not visible from this host"
        else:
            message = f"{byte_size(usage.free_bytes)} free on {usage.root}"
            if state == LOW:
                message += f", below min_free {byte_size(self.min_free or 0)}"
            elif state == CRITICAL:
                message += f", below the hard floor {byte_size(self.hard_floor)}: no pull starts"
        self.reading = replace(
            self.reading,
            state=state,
            root=usage.root,
            free_bytes=usage.free_bytes,
            total_bytes=usage.total_bytes,
            message=message,
            checked_at=self.clock(),
        )

    def _enough(self) -> bool:
        free = self.reading.free_bytes
        return free is None or self.min_free is None or free >= self.min_free

    def _free_space(self) -> None:
        """Prune dangling build cache, then remove unused images, LRU first, until enough."""
        try:
            freed = self.disk.prune_build_cache()
        except Exception as exc:  # noqa: BLE001 - images may still be removed
            self._note("disk_gc_failed", f"pruning the build cache failed: {exc}")
            freed = 0
        if freed:
            self._note("cache_pruned", f"pruned dangling build cache: {byte_size(freed)}")
            self._set(self.disk.disk_usage())
        if self._enough():
            return
        in_use = self._note_in_use(self.disk.image_ids_in_use())
        keep = keep_set(
            in_use,
            (self.disk.image_id(ref) for ref in self.configured()),
            (self.disk.image_id(ref) for ref in self.rollback_targets()),
        )
        images = self.disk.list_images()
        used = last_used({i.id: i.created for i in images}, self._seen_in_use)
        order = removal_order((Candidate(i.id, i.tags, i.size, used[i.id]) for i in images), keep)
        for image in order[:MAX_REMOVALS_PER_CHECK]:
            if self._enough():
                return
            self._remove(image)
            self._set(self.disk.disk_usage())

    def _remove(self, image: Candidate) -> None:
        name = ", ".join(image.tags) or image.id[:19]
        try:
            # By tag (an image with several tags cannot be removed by id without
            # force: the last tag removed deletes it), a dangling one by id; never
            # forced, so the engine itself refuses an image that a container uses.
            deleted = [self.disk.remove_image(ref) for ref in image.tags or (image.id,)]
        except Exception as exc:  # noqa: BLE001 - one refusal must not stop the others
            self._note("image_kept", f"could not remove image {name}: {exc}")
            return
        if not any(deleted):
            # A parent of other images loses its tag only: its layers are theirs too.
            self._note("image_kept", f"untagged unused image {name}; its layers are shared")
            return
        self.reading = replace(self.reading, images_removed=self.reading.images_removed + 1)
        self._note(
            "image_removed",
            f"removed unused image {name} ({byte_size(image.size)}) to free Docker disk space",
        )
