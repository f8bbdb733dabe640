"""The output follower: what each live container of ours says, as facts for the engine.

One thread per followed container reads its output through
`ContainerRuntime.follow_output` (from the container's start, so nothing said
before the thread began is missed) and hands each line that states a fact
(`agent.output.parse_line`: the agent's ``Listening for Jobs``, ``Running job``,
``Job … completed`` lines, start.sh's ``registered …; waiting for the go``) to
the engine as an `AgentSaid`; every other line is dropped at once. The
supervisor calls `track` after each change of its state: a container that is
now some lane's current one is followed, one that no longer is is let go (its
thread ends within about a second, or when the container ends). A follower is
started again only when its stream broke (the engine went away), from the start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from gpuci_tui.core.engine.agent.output import parse_line
from gpuci_tui.core.engine.agent.steps import AgentSaid
from gpuci_tui.core.engine.lifecycle import Lane
from gpuci_tui.core.engine.steps import Observation
from gpuci_tui.core.protocols import ContainerRuntime

log = logging.getLogger("gpuci_tui.supervisor")

#: A follower that broke (the engine's stream, not the container, ended) is started
#: again this long after, while its container is still a lane's.
REFOLLOW_AFTER = 5.0


@dataclass
class _Following:
    slot: int
    lane: Lane
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    broke_at: float | None = None
    """When its stream broke (None: running, or it ended with its container)."""


class OutputFollower:
    """Follows the output of the supervisor's live containers."""

    def __init__(self, runtime: ContainerRuntime, *, clock: Callable[[], float]) -> None:
        """Read through ``runtime``; ``clock`` times each fact's arrival."""
        self.runtime = runtime
        self.clock = clock
        self._following: dict[str, _Following] = {}
        self._send: Callable[[Observation], None] | None = None

    def bind(self, loop: asyncio.AbstractEventLoop, deliver: Callable[[Observation], None]) -> None:
        """Facts reach ``deliver`` on ``loop`` (the supervisor's)."""

        def send(obs: Observation) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed while stopping
                loop.call_soon_threadsafe(deliver, obs)

        self._send = send

    def track(self, wanted: Iterable[tuple[int, Lane, str]]) -> None:
        """Follow exactly the containers in ``wanted`` ((slot, lane, container id))."""
        if self._send is None:
            return
        now = self.clock()
        keep: set[str] = set()
        for slot, lane, container_id in wanted:
            keep.add(container_id)
            current = self._following.get(container_id)
            if current is not None and (
                current.broke_at is None or now - current.broke_at < REFOLLOW_AFTER
            ):
                continue  # following, or followed to its end, or broke just now
            self._start(_Following(slot, lane), container_id)
        for container_id in set(self._following) - keep:
            self._following.pop(container_id).stop.set()

    def stop(self) -> None:
        """Let every container go (their threads end within about a second)."""
        for following in self._following.values():
            following.stop.set()
        self._following.clear()

    @property
    def followed(self) -> frozenset[str]:
        """The container ids followed now."""
        return frozenset(self._following)

    def _start(self, following: _Following, container_id: str) -> None:
        send = self._send
        assert send is not None
        runtime, clock = self.runtime, self.clock

        def pump() -> None:
            try:
                for line in runtime.follow_output(container_id, following.stop):
                    fact = parse_line(line)
                    if fact is not None and not following.stop.is_set():
                        send(AgentSaid(following.slot, following.lane, container_id, fact, clock()))
            except Exception as exc:  # noqa: BLE001 - the facts are hints; Docker's events decide
                log.info("stopped following the output of %s: %s", container_id[:12], exc)
                # Read again from its start later (the engine is back, or the lane moved on).
                following.broke_at = clock()

        name = f"output-{container_id[:12]}"
        following.thread = threading.Thread(target=pump, name=name, daemon=True)
        self._following[container_id] = following
        following.thread.start()
