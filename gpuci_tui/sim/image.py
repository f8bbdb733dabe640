"""Build the agent emulator image from the host's static busybox, with ``docker import``.

No registry and no Dockerfile: a root file system tar (busybox + its applet links
+ emulator/agent.sh) is imported with ENTRYPOINT/ENV changes. The image carries
a content hash (label ``gpuci.sim.hash``) so it is rebuilt only when busybox or
the script changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import shutil
import struct
import subprocess
import tarfile
from importlib import resources
from typing import Any

from gpuci_tui.core.errors import GpuciError
from gpuci_tui.sim.agent_packages import BAKED_AGENT_VERSION
from gpuci_tui.sim.names import AGENT_VERSION_LABEL, START_GATE_LABEL

DEFAULT_TAG = "gpuci-sim/agent:1"
#: The agent version the emulator reports unless a newer package is mounted (agent.sh's).
EMULATOR_AGENT_VERSION = BAKED_AGENT_VERSION
HASH_LABEL = "gpuci.sim.hash"
_RECIPE = "4"  # bump when the tar layout or the import changes below change

#: Applets agent.sh and the tests use; linked even if `busybox --list` fails.
_NEEDED = (
    "sh", "nc", "base64", "sed", "tr", "wc", "head", "tail", "sleep", "rm", "cat", "env",
    "mkdir", "hostname", "kill", "ls", "ps", "grep", "printf", "date", "true", "false",
)  # fmt: skip


class EmulatorImageError(GpuciError):
    """The emulator image could not be built."""


def agent_script() -> bytes:
    """The emulator script shipped in the package."""
    return resources.files("gpuci_tui.sim").joinpath("emulator/agent.sh").read_bytes()


def _is_static_elf(data: bytes) -> bool:
    """True for an ELF executable without a PT_INTERP header (no dynamic loader needed)."""
    if data[:4] != b"\x7fELF":
        return False
    is64, little = data[4] == 2, data[5] == 1
    end = "<" if little else ">"
    if is64:
        (phoff,) = struct.unpack_from(end + "Q", data, 0x20)
        phentsize, phnum = struct.unpack_from(end + "HH", data, 0x36)
    else:
        (phoff,) = struct.unpack_from(end + "I", data, 0x1C)
        phentsize, phnum = struct.unpack_from(end + "HH", data, 0x2A)
    for i in range(phnum):
        (p_type,) = struct.unpack_from(end + "I", data, phoff + i * phentsize)
        if p_type == 3:  # PT_INTERP
            return False
    return True


def _find_busybox(path: str | None) -> tuple[str, bytes]:
    candidate = path or shutil.which("busybox") or "/bin/busybox"
    try:
        with open(candidate, "rb") as fh:
            data = fh.read()
    except OSError:
        raise EmulatorImageError(
            f"No busybox found at {candidate}. Install a static one "
            "(apt-get install busybox-static) to build the agent emulator image."
        ) from None
    if not _is_static_elf(data):
        raise EmulatorImageError(
            f"{candidate} is not a statically linked busybox, so it cannot run inside an "
            "empty image. Install busybox-static (apt-get install busybox-static)."
        )
    return candidate, data


def _applets(busybox: str) -> list[str]:
    try:
        out = subprocess.run(  # noqa: S603 - our own, fixed argv
            [busybox, "--list"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    names = {line.strip() for line in out.splitlines() if line.strip().isidentifier()}
    names.discard("busybox")
    return sorted(names | set(_NEEDED))


def _rootfs(busybox_bytes: bytes, applets: list[str], script: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add_dir(name: str, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)

        def add_file(name: str, data: bytes, mode: int) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))

        for d in ("bin", "etc", "run", "azp", "proc", "sys", "dev"):
            add_dir(d)
        add_dir("tmp", 0o1777)
        add_file("bin/busybox", busybox_bytes, 0o755)
        for name in applets:
            info = tarfile.TarInfo(f"bin/{name}")
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(info)
        add_file("etc/passwd", b"root:x:0:0:root:/azp:/bin/sh\n", 0o644)
        add_file("etc/group", b"root:x:0:\n", 0o644)
        add_file("azp/agent.sh", script, 0o755)
    return buf.getvalue()


def build_emulator_image(client: Any, tag: str = DEFAULT_TAG, *, busybox: str | None = None) -> str:
    """Make sure the emulator image exists and is current; return its tag.

    Idempotent: an image with the same content hash is reused; otherwise it is
    (re)imported and the outdated image is removed when nothing uses it.

    Args:
        client: A ``docker.DockerClient``.
        tag: ``repository:tag`` for the image.
        busybox: Path of a static busybox (default: the one on PATH, or /bin/busybox).

    Raises:
        EmulatorImageError: no static busybox, or the engine refused the import.
    """
    import docker.errors  # noqa: PLC0415 - docker is only needed when an image is built

    path, data = _find_busybox(busybox)
    script = agent_script()
    digest = hashlib.sha256(_RECIPE.encode() + data + b"\0" + script).hexdigest()[:16]
    old_id = None
    try:
        image = client.images.get(tag)
        if (image.labels or {}).get(HASH_LABEL) == digest:
            return tag
        old_id = image.id
    except docker.errors.ImageNotFound:
        pass
    repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "")
    try:
        client.api.import_image_from_data(
            _rootfs(data, _applets(path), script),
            repository=repository,
            tag=version or "latest",
            changes=[
                f"LABEL {HASH_LABEL}={digest}",
                # The agent version agent.sh bakes, as dockeragent/build.sh labels real images.
                f"LABEL {AGENT_VERSION_LABEL}={EMULATOR_AGENT_VERSION}",
                # agent.sh waits for the daemon's go when AZP_GO_FILE is set, as start.sh does.
                f"LABEL {START_GATE_LABEL}=1",
                "ENV PATH=/bin",
                "WORKDIR /azp",
                'ENTRYPOINT ["/bin/sh", "/azp/agent.sh"]',
            ],
        )
    except docker.errors.APIError as exc:
        raise EmulatorImageError(
            f"Docker refused to import the emulator image {tag}: {exc.explanation or exc}"
        ) from None
    if old_id is not None:
        # An image still used by a container stays until that container is gone.
        with contextlib.suppress(docker.errors.APIError):
            client.images.remove(old_id, noprune=False)
    return tag


__all__ = [
    "DEFAULT_TAG",
    "HASH_LABEL",
    "EmulatorImageError",
    "agent_script",
    "build_emulator_image",
]
