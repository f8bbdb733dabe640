"""Files inside a container: removing one, verified, with or without the image's ``rm``;
writing a root-only one (the start gate's go file).

The agent's token file must go whatever the image holds. ``rm`` run in the
container leaves nothing at the path (the state the project's own image
reaches by itself), but distroless and minimal images have no ``rm`` or
shell. So when the file is still there afterwards, it is replaced through the
engine's archive API by an empty file that only root could open (mode 0000):
that takes its contents away without any program of the image. Reading the
path back proves either outcome. An image that deletes the file itself costs
a single call: the first read finds nothing.
"""

from __future__ import annotations

import contextlib
import io
import posixpath
import tarfile
from typing import Any

import docker.errors

from gpuci_tui.core.docker.errors import ContainerOperationError, api_explanation
from gpuci_tui.core.docker.mapping import token_archive


def remove_file(api: Any, container_id: str, path: str) -> bool:
    """Delete ``path`` in the container (else empty it), then check it holds nothing.

    Returns True once the file is verified absent or empty, or the container is
    gone; False when it still has contents (a read-only mount or root file
    system over it).

    Raises:
        ContainerOperationError: the engine refused in another way.
    """
    if _empty_or_gone(api, container_id, path):
        return True
    if _rm(api, container_id, path) and _empty_or_gone(api, container_id, path):
        return True
    # No rm in the image (or it failed): overwrite it; this needs nothing of the image.
    directory, name = posixpath.split(path)
    try:
        accepted = api.put_archive(container_id, directory or "/", _empty_file_tar(name))
    except docker.errors.NotFound:
        return True  # the container (or the file's directory) went away meanwhile
    except docker.errors.APIError as exc:
        raise ContainerOperationError(
            f"Docker could not empty {path} in {container_id[:12]}: {api_explanation(exc)}"
        ) from exc
    return bool(accepted) and _empty_or_gone(api, container_id, path)


def _rm(api: Any, container_id: str, path: str) -> bool:
    """``rm -f path`` as root, best effort; False when the engine refused to run it."""
    try:
        # uid 0, not "root": an image without /etc/passwd cannot resolve the name.
        exec_id = api.exec_create(container_id, ["rm", "-f", path], user="0")["Id"]
        api.exec_start(exec_id)
    except docker.errors.APIError:
        # Not running (409), no rm in the image, or gone (404): the archive API decides.
        return False
    return True


def _empty_or_gone(api: Any, container_id: str, path: str) -> bool:
    """Whether ``path`` holds nothing to read (one archive call; its body is never read)."""
    try:
        stream, stat = api.get_archive(container_id, path)
    except docker.errors.NotFound:
        return True  # 404 for the path (or a container that just went away)
    except docker.errors.APIError as exc:
        raise ContainerOperationError(
            f"Docker could not check {path} in {container_id[:12]}: {api_explanation(exc)}"
        ) from exc
    with contextlib.suppress(Exception):
        stream.close()
    return isinstance(stat, dict) and stat.get("size") == 0


def _empty_file_tar(name: str) -> bytes:
    """A tar with one empty regular file ``name``, owned by root, mode 0000."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.mode = 0
        info.size = 0
        tar.addfile(info)
    return buffer.getvalue()


def put_file(api: Any, container_id: str, path: str, content: str) -> None:
    """Write ``content`` to ``path`` in a running container: directory 0700, file 0600, root's.

    One ``put_archive`` with an in-memory tar (as the token file is delivered).

    Raises:
        ContainerOperationError: the container is gone or not running, or the engine refused.
    """
    try:
        archive = token_archive(path, content)
    except ValueError as exc:
        raise ContainerOperationError(f"Cannot write {path}: {exc}") from exc
    try:
        accepted = api.put_archive(container_id, "/", archive)
    except docker.errors.APIError as exc:
        raise ContainerOperationError(
            f"Docker could not write {path} into {container_id[:12]}: {api_explanation(exc)}"
        ) from exc
    if not accepted:
        raise ContainerOperationError(f"Docker did not accept {path} for {container_id[:12]}.")
