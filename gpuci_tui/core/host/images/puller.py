"""The image puller: a group's pull policy applied before each container start.

One `ImagePuller` serves every slot of every group: at most ONE pull (or
registry check) per image at a time; a lane that needs an image being pulled
waits for that pull instead of starting its own. Policies (``[agents] pull``,
GitLab Runner's semantics):

* ``never``: nothing is asked; a missing image fails the start as before.
* ``missing``: pull when the image is not on the host.
* ``always``: ask the registry for the digest behind the tag (no layer is
  downloaded) at most once per ``pull_check_interval`` per image, and pull when
  it is not one of the local image's digests. An image pinned by digest never moves.

A failed pull never stops a lane that can run: with the image present, the
start goes on with it and the event says so. With the image absent, the start
is answered `StartFailed` of kind ``pull``: the lane waits and retries, never
counted towards parking (`engine.transitions_pull`). A failure is remembered for
`FAILURE_MEMORY` seconds so that the slots of a pool retrying one after another
do not each hit the registry. Below the disk's hard floor no pull starts.

The pulling runs in the puller's own threads; events and snapshot updates go to the loop
with ``call_soon_threadsafe`` (the reporter is not thread-safe).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from gpuci_tui.core.config.model import AgentsConfig
from gpuci_tui.core.docker.pull_progress import PullProgress, PullTracker, decimal_bytes, duration
from gpuci_tui.core.engine.lifecycle import Lane
from gpuci_tui.core.engine.steps import StartFailed
from gpuci_tui.core.errors import GpuciError, ImagePullError, RuntimeUnavailableError
from gpuci_tui.core.models import SupervisorSnapshot

__all__ = ["FAILURE_MEMORY", "ImagePuller", "ImageRegistry"]

#: Seconds a failed pull of an absent image is answered from memory (less than the
#: lanes' retry, `transitions_pull.PULL_RETRY`: each round of retries pulls once).
FAILURE_MEMORY = 20.0
#: Seconds an image found present is taken as present without asking the engine again:
#: a burst of starts (a pool filling up) costs one inspect, not one per start.
PRESENT_MEMORY = 5.0
#: At most one snapshot update per this many seconds for a pull's progress.
PUBLISH_EVERY = 1.0


@runtime_checkable
class ImageRegistry(Protocol):
    """What the puller needs from the engine (`docker.registry.EngineRegistry`)."""

    def local_digests(self, image: str) -> tuple[str, ...] | None:
        """The local image's repo digests; None when it is not on the host."""
        ...

    def remote_digest(self, image: str) -> str:
        """The registry's manifest digest for ``image`` (raises `ImagePullError`)."""
        ...

    def pull(self, image: str, on_line: Callable[[Mapping[str, Any]], None] | None = None) -> None:
        """Pull ``image``, each stream line to ``on_line`` (raises `ImagePullError`)."""
        ...


Progress = Callable[[PullProgress], None]


class ImagePuller:
    """Applies the pull policy before starts; one pull per image at a time (thread-safe)."""

    def __init__(
        self,
        registry: ImageRegistry,
        *,
        report: Callable[[str, str], None] = lambda kind, message: None,
        refusal: Callable[[], str | None] = lambda: None,
        changed: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Pull through ``registry``.

        Args:
            registry: the engine's pulls and digests.
            report: ``(kind, message)`` for events (called on the loop when there is one).
            refusal: why no pull may start now (the disk's hard floor), or None.
            changed: a snapshot is due (a pull's progress moved; called on the loop).
            clock: the time source.
        """
        self.registry = registry
        self.report = report
        self.refusal = refusal
        self.changed = changed
        self.clock = clock
        self._lock = threading.Lock()
        self._flights: dict[str, threading.Event] = {}
        self._answers: dict[str, str | None] = {}
        self._progress: dict[str, PullProgress] = {}
        self._checked: dict[str, float] = {}
        self._present: dict[str, float] = {}
        self._failed: dict[str, tuple[float, str]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = threading.Event()
        # Its own threads: a pull takes minutes, the loop's default executor must stay free.
        self._threads = ThreadPoolExecutor(max_workers=4, thread_name_prefix="gpuci-pull")
        self._waits: dict[str, asyncio.Future[str | None]] = {}
        self.pulls: dict[str, int] = {}
        """Pulls ended, by result (``ok``, ``failed``, ``refused``): the metrics read it."""

    # ------------------------------------------------------------------ the start's hook

    async def before_start(self, agents: AgentsConfig, slot: int, lane: Lane) -> StartFailed | None:
        """Apply ``agents.pull`` to ``agents.image``; a `StartFailed` when the lane must wait.

        The lanes that need one image share one call of `ensure` in the puller's own
        threads and wait for it on the loop: sixteen lanes waiting for a 10 GB pull
        must not hold the loop's default executor (every Docker and Azure call) for minutes.
        """
        image, policy, interval = agents.image, agents.pull, agents.pull_check_interval
        if policy == "never" or self._fresh(image, policy, interval, self.clock()):
            return None
        if self._closing.is_set():  # the daemon is stopping: its threads are gone
            stopping = f"pull of {image} not started: gpuci-tui is stopping"
            return StartFailed(slot, lane, "pull", stopping, self.clock())
        loop = self._loop = asyncio.get_running_loop()
        shared = self._waits.get(image)
        if shared is None:
            shared = loop.run_in_executor(self._threads, self.ensure, image, policy, interval)
            self._waits[image] = shared
            shared.add_done_callback(lambda done: self._forget_wait(image, done))
        problem = await asyncio.shield(shared)
        return None if problem is None else StartFailed(slot, lane, "pull", problem, self.clock())

    def _forget_wait(self, image: str, done: asyncio.Future[str | None]) -> None:
        if self._waits.get(image) is done:
            del self._waits[image]

    def ensure(self, image: str, policy: str, interval: float) -> str | None:
        """Make ``image`` ready under ``policy`` (blocking); why a start must wait, or None.

        Concurrent callers for one image share one check or pull and its answer.
        """
        with self._lock:
            flight = self._flights.get(image)
            leader = flight is None
            if leader:
                flight = self._flights[image] = threading.Event()
        assert flight is not None  # noqa: S101 - set above when absent
        if not leader:
            flight.wait()
            with self._lock:
                return self._answers.get(image)
        answer: str | None = None
        try:
            answer = self._decide(image, policy, interval)
        finally:
            with self._lock:
                self._answers[image] = answer
                del self._flights[image]
            flight.set()
        return answer

    def _decide(self, image: str, policy: str, interval: float) -> str | None:
        now = self.clock()
        if self._fresh(image, policy, interval, now):
            return None
        try:
            local = self.registry.local_digests(image)
        except GpuciError:
            return None  # the engine's problem: the start reports it with its own kind
        if local is not None:
            with self._lock:
                self._present[image] = now
            why = self._moved(image, local, policy, interval, now)
            if why is None:
                return None
        else:
            with self._lock:
                failed = self._failed.get(image)
            if failed is not None and failed[0] > now:
                return failed[1]
            why = "not on this host"
        refused = self.refusal()
        if refused is not None:
            return self._failure(image, f"pull of {image} not started: {refused}", local, "refused")
        try:
            self.pull(image, why=why)
        except RuntimeUnavailableError:
            return None  # the engine is down: the start reports it and pauses every start
        except GpuciError as exc:
            return self._failure(image, str(exc), local, "failed")
        return None

    def _fresh(self, image: str, policy: str, interval: float, now: float) -> bool:
        """Seen present a moment ago, and (``always``) checked within the interval."""
        with self._lock:
            seen = self._present.get(image)
            checked = self._checked.get(image)
        if seen is None or now - seen >= PRESENT_MEMORY:
            return False
        pinned = "@" in image
        return policy != "always" or pinned or (checked is not None and now - checked < interval)

    def _moved(
        self, image: str, local: tuple[str, ...], policy: str, interval: float, now: float
    ) -> str | None:
        """Why a present image must be pulled again (``always``, the tag moved), or None."""
        if policy != "always" or "@" in image:
            return None  # "missing", or pinned by digest: what is here is what is named
        with self._lock:
            last = self._checked.get(image)
            if last is not None and now - last < interval:
                return None
            self._checked[image] = now
        try:
            remote = self.registry.remote_digest(image)
        except GpuciError as exc:
            self._event("pull_check_failed", f"{exc}; starting with the present image")
            return None
        if not remote or any(d.endswith(f"@{remote}") for d in local):
            return None
        return f"the registry has {remote[:19]}… behind the tag"

    def _failure(
        self, image: str, message: str, local: tuple[str, ...] | None, result: str
    ) -> str | None:
        self._count(result)
        if local is not None:
            self._event("pull_failed", f"{message}; starting with the present image")
            return None
        self._event("pull_failed", message)
        with self._lock:
            self._failed[image] = (self.clock() + FAILURE_MEMORY, message)
        return message

    # ------------------------------------------------------------------ pulling

    def pull(
        self, image: str, *, why: str = "", on_progress: Progress | None = None
    ) -> PullProgress:
        """Pull ``image`` now (blocking), with events and progress; the final progress.

        The CLI's ``image pull`` calls this directly; starts go through `ensure`.

        Raises:
            ImagePullError: the pull failed (the message says why and what to do).
            RuntimeUnavailableError: the engine cannot be reached.
        """
        if self._closing.is_set():
            raise ImagePullError(f"pull of {image} not started: gpuci-tui is stopping")
        began = self.clock()
        tracker = PullTracker(image, began)
        last = PullProgress(image)
        published = 0.0
        self._event("pull_started", f"pulling {image}" + (f" ({why})" if why else ""))

        def on_line(line: Mapping[str, Any]) -> None:
            nonlocal last, published
            if self._closing.is_set():
                # Ends the worker thread at the next line: a shutdown must not wait
                # for a 10 GB pull (the loop's executor is joined at exit).
                raise ImagePullError(f"pull of {image} stopped: gpuci-tui is stopping")
            last = tracker.feed(line, self.clock())  # an error line raises PullError
            with self._lock:
                self._progress[image] = last
            if on_progress is not None:
                on_progress(last)
            now = self.clock()
            if now - published >= PUBLISH_EVERY:
                published = now
                self._on_loop(self.changed)

        try:
            self.registry.pull(image, on_line)
        finally:
            with self._lock:
                self._progress.pop(image, None)
            self._on_loop(self.changed)
        took = self.clock() - began
        with self._lock:
            self._failed.pop(image, None)
            self._checked[image] = self._present[image] = self.clock()
        self._count("ok")
        size = f", {decimal_bytes(last.bytes_total)}" if last.bytes_total else ""
        digest = f" ({last.digest})" if last.digest else ""
        self._event("pull_done", f"pulled {image}{digest} in {duration(took)}{size}")
        return replace(last, finished=True)

    def close(self) -> None:
        """Stop the running pulls at their next progress line; start no new one."""
        self._closing.set()
        self._threads.shutdown(wait=False, cancel_futures=True)

    def in_flight(self) -> dict[str, PullProgress]:
        """The pulls running now, by image."""
        with self._lock:
            return dict(self._progress)

    def overlay(self, snapshot: SupervisorSnapshot) -> SupervisorSnapshot:
        """``snapshot`` with the pulls in flight, each also the reason of the slots waiting for it."""
        pulls = self.in_flight()
        if not pulls:
            return snapshot
        slots = tuple(
            replace(slot, message=pulls[slot.image].describe())
            if slot.image in pulls and slot.container_id is None
            else slot
            for slot in snapshot.slots
        )
        lines = tuple(pulls[image].describe() for image in sorted(pulls))
        return replace(snapshot, slots=slots, pulls=lines)

    # ------------------------------------------------------------------ helpers

    def _count(self, result: str) -> None:
        with self._lock:
            self.pulls[result] = self.pulls.get(result, 0) + 1

    def _event(self, kind: str, message: str) -> None:
        self._on_loop(self.report, kind, message)

    def _on_loop(self, fn: Callable[..., None], *args: Any) -> None:
        """Call ``fn`` on the loop when one drives the puller, else here (the CLI)."""
        loop = self._loop
        if loop is None:
            fn(*args)
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: the daemon is stopping
            loop.call_soon_threadsafe(fn, *args)
