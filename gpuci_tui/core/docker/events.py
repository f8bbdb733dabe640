"""Following Docker's container event stream, across engine restarts.

`follow_events` reads the stream on a helper thread and hands events to the
caller through a queue. That keeps two promises no matter what the socket is
doing: the caller's generator returns within ~0.1 s of ``stop`` being set
(even while the helper is blocked in a read or a connect), and a broken stream
becomes one ``stream-lost`` event, retries with backoff (0.2 s doubling to a
5 s cap) and one ``stream-restored`` event once the engine answers again.
Events missed during the gap are not replayed here: the supervisor re-adopts
from `list_containers` on ``stream-restored``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from gpuci_tui.core.protocols import ContainerEvent

log = logging.getLogger("gpuci_tui.runtime")

STREAM_LOST = "stream-lost"
STREAM_RESTORED = "stream-restored"
STREAM_ENDED = "the Docker event stream ended (engine stopped or restarting?)"

EVENT_ACTIONS = (
    "create",
    "start",
    "restart",
    "die",
    "oom",
    "kill",
    "stop",
    "destroy",
    "pause",
    "unpause",
    "health_status",
)
"""The container actions asked for (exec, attach, resize, top… are noise here)."""

NON_LABEL_ATTRIBUTES = frozenset({"image", "name", "exitCode", "signal", "execID", "execDuration"})
"""Keys Docker adds to ``Actor.Attributes`` next to the container's labels."""


OpenStream = Callable[[float | None], Iterable[Mapping[str, Any]]]
"""Opens the stream; the argument is ``since`` (Unix seconds) for the first connection."""


def parse_event(raw: Mapping[str, Any]) -> ContainerEvent | None:
    """A `ContainerEvent` from one decoded Docker event; None for non-container events."""
    if raw.get("Type", "container") != "container":
        return None
    action_text = str(raw.get("Action") or raw.get("status") or "")
    if not action_text:
        return None
    # "health_status: healthy" / "exec_start: sh -c …": keep the verb, the rest is detail.
    action, _, detail = action_text.partition(":")
    actor: Mapping[str, Any] = raw.get("Actor") or {}
    attributes: Mapping[str, Any] = actor.get("Attributes") or {}
    exit_code: int | None = None
    if "exitCode" in attributes:
        try:
            exit_code = int(attributes["exitCode"])
        except (TypeError, ValueError):
            exit_code = None
    nano = raw.get("timeNano")
    seconds = nano / 1e9 if isinstance(nano, int | float) else float(raw.get("time") or 0)
    labels = {str(k): str(v) for k, v in attributes.items() if k not in NON_LABEL_ATTRIBUTES}
    return ContainerEvent(
        action=action.strip(),
        container_id=str(actor.get("ID") or raw.get("id") or ""),
        name=str(attributes.get("name") or ""),
        labels=labels,
        exit_code=exit_code,
        time=seconds,
        message=detail.strip(),
    )


class _Stop:
    """Queue sentinel: the helper thread has finished."""


def _close_quietly(stream: object) -> None:
    close = getattr(stream, "close", None)
    if close is None:
        return
    try:
        close()
    except Exception as exc:  # noqa: BLE001 - the stream is being thrown away anyway
        log.debug("closing the Docker event stream failed: %s", exc)


class _Follower:
    """The helper thread's state: the open stream and the retry loop."""

    def __init__(
        self,
        open_stream: OpenStream,
        describe: Callable[[BaseException], str],
        since: float | None,
        min_backoff: float,
        max_backoff: float,
    ) -> None:
        self.open_stream = open_stream
        self.describe = describe
        self.since = since
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self.out: queue.SimpleQueue[ContainerEvent | _Stop] = queue.SimpleQueue()
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._stream: object | None = None

    def shutdown(self) -> None:
        """Stop the loop and unblock a read in progress (callable from any thread)."""
        self.done.set()
        with self._lock:
            stream, self._stream = self._stream, None
        if stream is not None:
            _close_quietly(stream)

    def run(self) -> None:
        try:
            self._loop()
        except Exception:  # pragma: no cover - a bug; keep the caller from hanging
            log.exception("Docker event follower failed")
        finally:
            self.out.put(_Stop())

    def _loop(self) -> None:
        lost = False
        delay = self.min_backoff
        since = self.since
        while not self.done.is_set():
            try:
                stream = self.open_stream(since)
            except Exception as exc:  # noqa: BLE001 - any failure is "engine unavailable"
                if not lost:
                    lost = True
                    self._lost(self.describe(exc))
                self.done.wait(delay)
                delay = min(delay * 2, self.max_backoff)
                continue
            since = None  # replay only once: after a gap the supervisor re-adopts
            with self._lock:
                self._stream = stream
            if self.done.is_set():
                _close_quietly(stream)
                break
            if lost:
                lost = False
                log.info("Docker event stream restored")
                self.out.put(ContainerEvent(action=STREAM_RESTORED, time=time.time()))
            opened = time.monotonic()
            reason = STREAM_ENDED
            try:
                for raw in stream:
                    event = parse_event(raw)
                    if event is not None:
                        self.out.put(event)
            except Exception as exc:  # noqa: BLE001 - a broken stream is expected
                reason = f"the Docker event stream broke (engine stopped or restarting?): {exc}"
            finally:
                with self._lock:
                    self._stream = None
                _close_quietly(stream)
            if self.done.is_set():
                break
            lost = True
            self._lost(reason)
            # A stream that was up for a while gets a quick first retry; one that
            # keeps breaking right after opening backs off like a failed connect.
            if time.monotonic() - opened > self.max_backoff:
                delay = self.min_backoff
            self.done.wait(delay)
            delay = min(delay * 2, self.max_backoff)

    def _lost(self, reason: str) -> None:
        log.warning("Docker event stream lost: %s; reconnecting", reason)
        self.out.put(ContainerEvent(action=STREAM_LOST, time=time.time(), message=reason))


def follow_events(
    open_stream: OpenStream,
    stop: threading.Event,
    *,
    describe: Callable[[BaseException], str] = str,
    since: float | None = None,
    min_backoff: float = 0.2,
    max_backoff: float = 5.0,
    poll: float = 0.1,
) -> Iterator[ContainerEvent]:
    """Yield container events until ``stop`` is set, reconnecting when the stream breaks.

    Args:
        open_stream: Opens a decoded event stream (blocking until the engine answers);
            it gets ``since`` on the first call and None afterwards. A stream with a
            ``close()`` method is closed from another thread on stop.
        stop: Set by the caller to end the iteration (honoured within ``poll`` seconds).
        describe: Turns a connection failure into the ``stream-lost`` message.
        since: Replay events from this Unix time on the first connection.
        min_backoff: First retry delay after the stream is lost.
        max_backoff: Cap of the doubling retry delay.
        poll: How often the caller's thread checks ``stop``.

    Yields:
        Docker's container events, plus ``stream-lost`` (message = why) and
        ``stream-restored`` around an outage.
    """
    follower = _Follower(open_stream, describe, since, min_backoff, max_backoff)
    thread = threading.Thread(target=follower.run, name="gpuci-docker-events", daemon=True)
    thread.start()
    try:
        while not stop.is_set():
            try:
                item = follower.out.get(timeout=poll)
            except queue.Empty:
                continue
            if isinstance(item, _Stop):
                return
            yield item
    finally:
        follower.shutdown()
        # Usually instant (the read is unblocked by the close); a connect that
        # hangs is left to its daemon thread rather than delaying the caller.
        thread.join(timeout=0.2)
