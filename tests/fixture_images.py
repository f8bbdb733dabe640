"""The images the tests make on the Docker engine, each made once per machine.

Several pytest processes share one engine (the xdist workers of a run, and other
runs on the machine). Making an image under a fixed tag while another test runs
a container of it moves the tag to a new image id, and a daemon that watches its
image then sees it change under it (and rolls its agents out). So each image is
made under a machine-wide lock, and only when its tag is missing or was made
from something else: a label records what it was made from.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import tarfile
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import pytest

from tests.machine import machine_lock

FIXTURE_IMAGE = "gpuci-fixture/busybox:1"
RECIPE_LABEL = "gpuci.test.recipe"

BUSYBOX_APPLETS = (
    "sh", "sleep", "true", "false", "cat", "echo", "ls", "nc", "wget", "base64", "sed", "grep",
    "rm", "date", "kill", "printf", "tail", "head", "dd", "env", "seq", "mkdir", "test", "tr",
    "cut", "awk", "timeout",
)  # fmt: skip


def _lock_name(tag: str) -> str:
    return "image-" + "".join(c if c.isalnum() else "-" for c in tag)


def image_lock(tag: str) -> AbstractContextManager[None]:
    """The machine-wide lock under which ``tag`` is built: workers and checkouts share the
    engine, and two builds of one tag at once leave either image behind it."""
    return machine_lock(_lock_name(tag))


def busybox_rootfs_tar() -> bytes:
    """A root file system of the host's static busybox and its applet links."""
    busybox = shutil.which("busybox") or "/bin/busybox"
    if not os.path.exists(busybox):
        pytest.fail(
            "A static busybox (apt-get install busybox-static) is required for this test "
            "and is missing. Run scripts/test.sh, which installs and starts it.",
            pytrace=False,
        )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("bin", "tmp", "run", "etc"):
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if d == "tmp" else 0o755
            tar.addfile(info)
        tar.add(busybox, arcname="bin/busybox")
        for applet in BUSYBOX_APPLETS:
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type = tarfile.SYMTYPE
            info.linkname = "busybox"
            tar.addfile(info)
    return buf.getvalue()


def busybox_image(client: Any) -> str:
    """The busybox fixture image, imported locally (no registry is reachable)."""
    with machine_lock(_lock_name(FIXTURE_IMAGE)):
        try:
            client.images.get(FIXTURE_IMAGE)
        except Exception:  # noqa: BLE001 - not there (or unreadable): import it
            repository, _, tag = FIXTURE_IMAGE.rpartition(":")
            client.api.import_image_from_data(busybox_rootfs_tar(), repository=repository, tag=tag)
    return FIXTURE_IMAGE


def emulator_image(client: Any) -> str:
    """The agent emulator image (`gpuci_tui.sim.image`), built or found current."""
    from gpuci_tui.sim.image import DEFAULT_TAG, build_emulator_image

    with machine_lock(_lock_name(DEFAULT_TAG)):
        return build_emulator_image(client)


def derived_image(
    client: Any, base: str, tag: str, changes: Sequence[str], command: Sequence[str] | None = None
) -> str:
    """``base`` committed as ``tag`` with Dockerfile-like ``changes`` (ENTRYPOINT, ENV, …).

    ``command``: the command of the container committed (it becomes the image's CMD).
    Made again only when ``base`` or the changes differ from what ``tag`` was made from.
    """
    base_id = client.images.get(base).id
    recipe = hashlib.sha256(
        "\0".join([base_id, *changes, *(command or ["-"])]).encode()
    ).hexdigest()[:16]
    with machine_lock(_lock_name(tag)):
        with contextlib.suppress(Exception):  # missing: make it
            if (client.images.get(tag).labels or {}).get(RECIPE_LABEL) == recipe:
                return tag
        repository, _, version = tag.rpartition(":")
        container = client.containers.create(base, list(command) if command else None)
        try:
            container.commit(
                repository=repository,
                tag=version,
                changes=[*changes, f"LABEL {RECIPE_LABEL}={recipe}"],
            )
        finally:
            container.remove(force=True)
    return tag
