"""The token file is gone from every agent container once its agent is online.

The registration token (the PAT, or an Entra access token: `secrets.credentials`)
reaches an agent container only as a file copied in before it starts
(`agentspec.TOKEN_PATH`); the agent needs it to register and open its session,
never afterwards. The project's own image deletes it at once, but an image that
follows Microsoft's contract without doing so would leave the token readable by
every job for the container's whole life. So, whatever the image does, the
daemon removes the file from each container whose agent the server shows
online, and checks that it is gone; a container where it cannot is reported as
an event (with the container, never the token). The removal needs no program
of the image (no ``rm``, no shell): the file is emptied through the engine's
archive API (`files.remove_file`).

`TokenSweeper` follows the supervisor's snapshots (like the metrics); the
removal itself is the runtime's (`TokenFileRemover`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from gpuci_tui.core.docker.agentspec import TOKEN_PATH
from gpuci_tui.core.host.handle import Supervised
from gpuci_tui.core.models import SupervisorSnapshot

log = logging.getLogger(__name__)


@runtime_checkable
class TokenFileRemover(Protocol):
    """A runtime that can delete a file in a running container."""

    def remove_file(self, container_id: str, path: str) -> bool:
        """Delete or empty ``path`` in the container; True once verified (or the container is gone)."""
        ...


def online_containers(snapshot: SupervisorSnapshot) -> set[str]:
    """Containers whose agent the server shows online (they no longer need the token)."""
    return {
        agent.container_id
        for slot in snapshot.slots
        for agent in slot.agents
        if agent.container_id is not None and (agent.agent_status or "").lower() == "online"
    }


class TokenSweeper:
    """Removes the token file from each container once, after its agent came online."""

    def __init__(self, remover: TokenFileRemover, supervised: Supervised) -> None:
        """Sweep through ``remover``; report failures through ``supervised``'s reporter."""
        self.remover = remover
        self.supervised = supervised
        self.swept: set[str] = set()
        """Containers already cleaned (pruned to those still in the snapshot: bounded)."""

    def due(self, snapshot: SupervisorSnapshot) -> list[str]:
        """The containers to sweep now; forgets the ones that are gone."""
        online = online_containers(snapshot)
        live = {a.container_id for s in snapshot.slots for a in s.agents if a.container_id}
        self.swept &= live
        return sorted(online - self.swept)

    async def sweep(self, containers: Iterable[str]) -> None:
        """Remove the token file from each container and check it is gone."""
        for cid in containers:
            self.swept.add(cid)
            try:
                gone = await asyncio.to_thread(self.remover.remove_file, cid, TOKEN_PATH)
            except Exception as exc:  # noqa: BLE001 - one container's failure must not stop others
                log.warning("could not remove the token file from %s: %s", cid[:12], exc)
                gone = False
            if not gone:
                self.supervised.reporter.event(
                    "token_file_kept",
                    f"container {cid[:12]}: its token file {TOKEN_PATH} could not be removed; "
                    "jobs in it may read the token. Stop it, and fix the image",
                )

    async def follow(self) -> None:
        """Sweep on every snapshot until cancelled."""
        queue = self.supervised.subscribe()
        try:
            await self.sweep(self.due(self.supervised.snapshot()))
            while True:
                item = await queue.get()
                if isinstance(item, SupervisorSnapshot):
                    await self.sweep(self.due(item))
        finally:
            self.supervised.unsubscribe(queue)
