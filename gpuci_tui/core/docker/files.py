"""Deleting a file inside a running container, verified (the agent's token file)."""

from __future__ import annotations

import contextlib
from typing import Any

import docker.errors

from gpuci_tui.core.docker.errors import ContainerOperationError, api_explanation


def remove_file(api: Any, container_id: str, path: str) -> bool:
    """``rm -f path`` in the container as root, then check it is gone.

    Returns True once the file is verified absent, or the container is gone or no
    longer running (nothing in it can read the file any more); False when the
    file is still there (an image without ``rm``, a read-only mount over it).

    Raises:
        ContainerOperationError: the engine refused in another way.
    """
    try:
        exec_id = api.exec_create(container_id, ["rm", "-f", path], user="root")["Id"]
        api.exec_start(exec_id)
    except docker.errors.NotFound:
        return True
    except docker.errors.APIError as exc:
        if exc.status_code == 409:  # not running (exited, paused, being removed)
            return True
        raise ContainerOperationError(
            f"Docker could not remove {path} from {container_id[:12]}: {api_explanation(exc)}"
        ) from exc
    try:
        stream, _stat = api.get_archive(container_id, path)
    except docker.errors.NotFound:
        return True  # 404 for the path (or a container that just went away)
    except docker.errors.APIError as exc:
        raise ContainerOperationError(
            f"Docker could not check {path} in {container_id[:12]}: {api_explanation(exc)}"
        ) from exc
    with contextlib.suppress(Exception):
        stream.close()
    return False
