"""Containers a failed start leaves behind, and how `DockerRuntime.start` gets rid of them.

A start is three engine calls (create, copy the token file in, start). When a
later call fails, the container is removed at once (`discard`). That removal
can fail too, for the same reason (the daemon out of file descriptors, the
engine restarting), and a create whose answer was lost leaves a container the
daemon never heard of. Either way a container in state ``created`` keeps the
slot's name, and every following start of that slot would meet a name
conflict for ever. So a conflict on create is settled here: a container of the
same name that never ran and carries this supervisor's labels is ours, left
half-made, and is removed before the create is tried once more
(`reclaim_half_made`). Anything else holding the name is left alone, and the
conflict names it (`holder_of`): the engine tells a leftover of ours (removed
as usual) from a container another instance or someone else made.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import docker.errors

from gpuci_tui.core.docker.agentspec import LABEL_INSTANCE, LABEL_LANE, LABEL_SLOT
from gpuci_tui.core.docker.mapping import info_from_inspect
from gpuci_tui.core.protocols import ContainerInfo

log = logging.getLogger("gpuci_tui.runtime")

#: Labels that identify a slot's container; a spec without them (tests) is matched on all.
_OWNER_LABELS = (LABEL_INSTANCE, LABEL_SLOT, LABEL_LANE)


def discard(api: Any, container_id: str, name: str) -> bool:
    """Force-remove a container a failed start made; False (logged) when it could not be."""
    try:
        api.remove_container(container_id, force=True)
    except docker.errors.NotFound:
        pass
    except Exception as exc:  # noqa: BLE001 - reported, the original error matters more
        log.warning(
            "could not remove the half-made container %s (%s) yet: %s; it is removed "
            "before the slot's next start",
            name,
            container_id[:12],
            exc,
        )
        return False
    return True


def reclaim_half_made(api: Any, name: str, labels: Mapping[str, str]) -> bool:
    """Remove the container called ``name`` if it is one of ours that never started.

    Returns True when the name is free now.
    """
    try:
        details = api.inspect_container(name)
    except docker.errors.NotFound:
        return True  # gone meanwhile (removed): the name is free
    except Exception:  # noqa: BLE001 - cannot tell: leave it, the conflict stands
        return False
    state = (details.get("State") or {}).get("Status")
    theirs = (details.get("Config") or {}).get("Labels") or {}
    keys = [k for k in _OWNER_LABELS if k in labels] or list(labels)
    if state != "created" or any(theirs.get(k) != labels[k] for k in keys):
        return False
    log.warning(
        "removing %s (%s): a container of ours left half-made by an earlier failed start",
        name,
        str(details.get("Id", ""))[:12],
    )
    return discard(api, str(details.get("Id") or name), name)


def holder_of(api: Any, name: str) -> ContainerInfo | None:
    """The container called ``name``, or None when it is gone or cannot be inspected."""
    try:
        return info_from_inspect(api.inspect_container(name))
    except Exception:  # noqa: BLE001 - cannot tell: the conflict is reported without it
        return None
