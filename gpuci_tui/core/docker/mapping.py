"""Translation between our container dataclasses and the Docker Engine API's shapes.

One direction builds what `create_container` needs from a `ContainerSpec`
(host config, GPU device requests, read-only mounts) plus the in-memory tar
that carries the token file; the other reads `ContainerInfo` from the JSON of
`GET /containers/json` and `GET /containers/{id}/json`. Nothing here talks to
the engine, so all of it is unit-tested without one.
"""

from __future__ import annotations

import io
import re
import tarfile
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

from docker.types import DeviceRequest, Mount

from gpuci_tui.core.protocols import ContainerInfo, ContainerSpec

GPU_CAPABILITIES = [["gpu"]]
"""What ``docker run --gpus`` asks for: any driver offering the ``gpu`` capability."""

TOKEN_DIR_MODE = 0o700
TOKEN_FILE_MODE = 0o600

_EXITED = re.compile(r"^Exited \((-?\d+)\)")


def device_requests(gpus: str | tuple[str, ...]) -> list[DeviceRequest]:
    """The ``DeviceRequests`` for a spec's ``gpus`` (empty for "none").

    ``"all"`` becomes ``Count=-1`` (like ``--gpus all``); a tuple of indexes or
    UUIDs becomes ``DeviceIDs`` (like ``--gpus '"device=0,2"'``). Docker refuses a
    request that sets both. A comma-separated string is read as a list of ids.
    """
    if isinstance(gpus, str):
        text = gpus.strip()
        if text.lower() in ("", "none"):
            return []
        if text.lower() == "all":
            return [DeviceRequest(count=-1, capabilities=GPU_CAPABILITIES)]
        ids = [part.strip() for part in text.split(",") if part.strip()]
    else:
        ids = [str(part).strip() for part in gpus if str(part).strip()]
    if not ids:
        return []
    return [DeviceRequest(device_ids=ids, capabilities=GPU_CAPABILITIES)]


def _read_only(mode: str, host: str) -> bool:
    parts = {part.strip().lower() for part in mode.split(",") if part.strip()} or {"ro"}
    unknown = parts - {"ro", "rw"}
    if unknown or parts == {"ro", "rw"}:
        raise ValueError(
            f"Mount mode {mode!r} for {host} is not supported: use 'ro' (read-only) or 'rw'."
        )
    return "rw" not in parts


def mounts(spec: ContainerSpec) -> list[Mount]:
    """Bind mounts for the spec's volumes (always read-only) and its extra mounts.

    `Mount` (``HostConfig.Mounts``) is used rather than ``Binds``: a host path that
    does not exist is refused instead of being silently created as an empty
    root-owned directory, paths may contain ``:``, and one host path may be
    mounted at two places.

    Raises:
        ValueError: an extra mount's mode is neither ``ro`` nor ``rw``.
    """
    result = [
        Mount(target=volume.container, source=volume.host, type="bind", read_only=True)
        for volume in spec.volumes
    ]
    for host, container, mode in spec.extra_mounts:
        result.append(
            Mount(target=container, source=host, type="bind", read_only=_read_only(mode, host))
        )
    return result


def host_config_kwargs(spec: ContainerSpec) -> dict[str, Any]:
    """Keyword arguments for `APIClient.create_host_config` built from ``spec``.

    Raises:
        ValueError: a mount mode is invalid.
    """
    kwargs: dict[str, Any] = {
        "auto_remove": spec.auto_remove,  # off for agents: see ContainerSpec.auto_remove
        "oom_score_adj": spec.oom_score_adj,
        "network_mode": spec.network,
    }
    if spec.mem_limit:
        # Without an equal swap limit the kernel swaps instead of killing, and
        # the OOM-kill the operator configured would never happen.
        kwargs["mem_limit"] = spec.mem_limit
        kwargs["memswap_limit"] = spec.mem_limit
    requests = device_requests(spec.gpus)
    if requests:
        kwargs["device_requests"] = requests
    binds = mounts(spec)
    if binds:
        kwargs["mounts"] = binds
    return kwargs


def token_member_paths(token_path: str) -> tuple[str, str]:
    """The tar member names (directory, file) for ``token_path``, relative to ``/``.

    Raises:
        ValueError: the path is not absolute, contains ``..`` or sits directly in ``/``.
    """
    path = PurePosixPath(token_path)
    if not path.is_absolute() or ".." in path.parts or len(path.parts) < 3:
        raise ValueError(
            f"Token path {token_path!r} must be an absolute file path inside a directory "
            "of its own, e.g. /run/azp/token."
        )
    relative = path.relative_to("/")
    return str(relative.parent), str(relative)


def token_archive(token_path: str, token: str, *, now: float | None = None) -> bytes:
    """An in-memory tar with the token's directory (0700) and the token file (0600).

    The file holds exactly the token's UTF-8 bytes, without a trailing newline.
    Both entries belong to root: the agent image's entrypoint starts as root,
    reads the file and drops privileges. Nothing is written to the host's disk.

    Raises:
        ValueError: ``token_path`` is unusable (see `token_member_paths`).
    """
    directory, file_name = token_member_paths(token_path)
    mtime = time.time() if now is None else now
    data = token.encode("utf-8")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dir_info = tarfile.TarInfo(directory)
        dir_info.type = tarfile.DIRTYPE
        dir_info.mode = TOKEN_DIR_MODE
        dir_info.mtime = int(mtime)
        tar.addfile(dir_info)
        file_info = tarfile.TarInfo(file_name)
        file_info.mode = TOKEN_FILE_MODE
        file_info.size = len(data)
        file_info.mtime = int(mtime)
        tar.addfile(file_info, io.BytesIO(data))
    return buffer.getvalue()


def parse_docker_time(text: object) -> float | None:
    """Unix seconds from Docker's RFC 3339 nanosecond timestamps; None for "never"."""
    if not isinstance(text, str) or not text or text.startswith("0001-01-01"):
        return None
    match = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", text)
    if not match:
        return None
    base, fraction, zone = match.groups()
    # datetime takes at most microseconds; Docker sends nanoseconds.
    micro = (fraction or "0")[:6].ljust(6, "0")
    zone = "+00:00" if zone == "Z" else zone
    try:
        return datetime.fromisoformat(f"{base}.{micro}{zone}").timestamp()
    except ValueError:
        return None


def exit_code_from_status(status: object) -> int | None:
    """The exit code in a list entry's human status, e.g. ``Exited (137) 2 seconds ago``."""
    if isinstance(status, str) and (match := _EXITED.match(status)):
        return int(match.group(1))
    return None


def _labels(value: object) -> dict[str, str]:
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    return {}


def info_from_summary(item: Mapping[str, Any]) -> ContainerInfo:
    """A `ContainerInfo` from one entry of ``GET /containers/json`` (no inspect)."""
    names = item.get("Names") or []
    name = str(names[0]).lstrip("/") if names else ""
    state = str(item.get("State") or "")
    status_text = item.get("Status")
    exit_code = exit_code_from_status(status_text) if state in ("exited", "dead") else None
    return ContainerInfo(
        id=str(item.get("Id", "")),
        name=name,
        labels=_labels(item.get("Labels")),
        status=state or "unknown",
        image=str(item.get("Image") or ""),
        exit_code=exit_code,
        image_id=str(item.get("ImageID") or ""),
    )


def info_from_inspect(data: Mapping[str, Any]) -> ContainerInfo:
    """A `ContainerInfo` from ``GET /containers/{id}/json``."""
    state: Mapping[str, Any] = data.get("State") or {}
    config: Mapping[str, Any] = data.get("Config") or {}
    status = str(state.get("Status") or "unknown")
    exit_code: int | None = None
    if status in ("exited", "dead"):
        raw = state.get("ExitCode")
        exit_code = int(raw) if isinstance(raw, int) else None
    return ContainerInfo(
        id=str(data.get("Id", "")),
        name=str(data.get("Name") or "").lstrip("/"),
        labels=_labels(config.get("Labels")),
        status=status,
        image=str(config.get("Image") or data.get("Image") or ""),
        started_at=parse_docker_time(state.get("StartedAt")),
        exit_code=exit_code,
        oom_killed=bool(state.get("OOMKilled", False)),
        # Top-level "Image" is the id of the image the container runs; Config's is the
        # reference it was created from.
        image_id=str(data.get("Image") or ""),
    )
