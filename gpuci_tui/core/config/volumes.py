"""The rules of a read-only dataset mount (``[[agents.volumes]]``), for the loader and the wizard.

A mount must not give a job the host (its credentials, the Docker socket, its
devices), must not hide the container's own system or the agent's token
directory, and its variable must not shadow one the agent image, the Azure agent
or the NVIDIA runtime reads. Every message names the key and what to do.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

from gpuci_tui.core.config.file import ConfigError, raise_if_any, show
from gpuci_tui.core.config.model import VolumeConfig
from gpuci_tui.core.config.validate import as_text

# Mount points that would hide the container's own system, or the agent's token directory.
_SYSTEM = ("/proc", "/sys", "/dev", "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64")
SYSTEM_PATHS = (*_SYSTEM, "/run", "/var/run")
"""Container paths a volume may not cover (``/run`` holds the agent's token directory)."""
HOST_SENSITIVE = (
    "/etc", "/root", "/boot", "/proc", "/sys", "/dev", "/run", "/var/run", "/var/lib/docker",
    "/var/lib/containerd",
)  # fmt: skip
"""Host paths whose contents give a job the host: credentials, the Docker socket, devices."""
# Env prefixes the agent image, the Azure agent or the NVIDIA runtime read themselves.
RESERVED_ENV_PREFIXES = ("AZP_", "VSO_", "AGENT_", "NVIDIA_")
RESERVED_ENV_NAMES = ("PATH", "HOME", "HOSTNAME", "USER", "SHELL")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Mount(Protocol):
    """What `check_volume` reads of the mounts accepted before (a `VolumeConfig`)."""

    @property
    def container(self) -> str: ...  # noqa: D102
    @property
    def env(self) -> str | None: ...  # noqa: D102


def check_volume(
    host: object,
    container: object,
    env: object = None,
    existing: Sequence[Mount] = (),
    *,
    index: int | None = None,
) -> tuple[str, str, str | None]:
    """Check one read-only dataset mount, also against the mounts accepted before it.

    Args:
        host: Host directory: absolute, existing, a directory.
        container: Path inside the agent: absolute, not a system path, not used twice.
        env: Optional name of the env var that names the mount inside the agent:
            an identifier, not reserved (``AZP_*``, ``PATH`` …), not used twice.
        existing: The mounts accepted so far.
        index: Position in ``agents.volumes`` for the error keys (default: ``len(existing)``).

    Returns:
        ``(host, container, env)`` normalised; ``env`` is None when empty.

    Raises:
        ConfigError: one problem, or `ConfigErrors` when several fields are wrong.
    """
    at = f"agents.volumes[{len(existing) if index is None else index}]"
    errors: list[ConfigError] = []
    checked: list[Any] = []
    for check, value in ((_mount_host, host), (_mount_container, container), (_mount_env, env)):
        try:
            checked.append(check(value, existing, at))
        except ConfigError as exc:
            errors.append(exc)
    raise_if_any(errors)
    return checked[0], checked[1], checked[2]


def _absolute(value: object, key: str) -> str:
    text = as_text(value, key, "an absolute path")
    if not text.startswith("/"):
        raise ConfigError(f"must be an absolute path (starting with /), got {show(text)}", key=key)
    # normpath keeps a leading "//" (POSIX allows it), which means "/" here.
    return "/" + posixpath.normpath(text).lstrip("/")


_HOST_PATHS_ARE_LOCAL: ContextVar[bool] = ContextVar("host_paths_are_local", default=True)


@contextmanager
def host_paths_elsewhere() -> Iterator[None]:
    """Check volume host paths as paths only, not against this machine's disk.

    For ``export kubernetes``: the paths name directories on the cluster's nodes,
    which the exporting machine need not have.
    """
    token = _HOST_PATHS_ARE_LOCAL.set(False)
    try:
        yield
    finally:
        _HOST_PATHS_ARE_LOCAL.reset(token)


def _mount_host(value: object, existing: Sequence[Mount], at: str) -> str:
    key = f"{at}.host"
    path = _absolute(value, key)
    exposed = exposes_host(path)
    if exposed is not None:
        raise ConfigError(
            f"{path} would give every job {exposed}; mount only the dataset's own directory "
            "(e.g. /data/imagenet)",
            key=key,
        )
    if _HOST_PATHS_ARE_LOCAL.get() and not os.path.isdir(path):
        why = "is not a directory" if os.path.exists(path) else "does not exist on this host"
        raise ConfigError(f"{path} {why}; give an existing directory", key=key)
    return path


def _own_directories() -> tuple[str, ...]:
    """gpuci-tui's own directories (config, state with the history, PAT store) and Docker's."""
    import platformdirs

    dirs = [
        str(platformdirs.user_config_path("gpuci-tui", appauthor=False)),
        str(platformdirs.user_state_path("gpuci-tui", appauthor=False)),
        str(platformdirs.user_data_path("gpuci-tui", appauthor=False)),
    ]
    docker_host = os.environ.get("DOCKER_HOST", "")
    if docker_host.startswith("unix://"):
        dirs.append(posixpath.dirname(docker_host.removeprefix("unix://")))
    return tuple(posixpath.normpath(d) for d in dirs if d.startswith("/"))


def exposes_host(path: str) -> str | None:
    """What mounting host ``path`` would expose (None: nothing of the host's own).

    A path is refused when it is, lies under or contains a sensitive one: ``/``
    holds them all, ``/var`` holds the Docker socket's directory, ``/home`` may
    hold our configuration.
    """
    if path == "/":
        return "the host's whole file system"
    for sensitive in (*HOST_SENSITIVE, *_own_directories()):
        if path == sensitive or path.startswith(sensitive + "/"):
            return f"the host's {sensitive}"
        if sensitive.startswith(path + "/"):
            return f"the host's {sensitive} (inside {path})"
    return None


def _mount_container(value: object, existing: Sequence[Mount], at: str) -> str:
    key = f"{at}.container"
    path = _absolute(value, key)
    if path == "/" or any(path == p or path.startswith(p + "/") for p in SYSTEM_PATHS):
        raise ConfigError(
            f"{path} is a system path in the container; use e.g. /datasets/NAME", key=key
        )
    if any(posixpath.normpath(m.container) == path for m in existing):
        raise ConfigError(f"{path} is already used by another volume", key=key)
    return path


def _mount_env(value: object, existing: Sequence[Mount], at: str) -> str | None:
    key = f"{at}.env"
    name = None if value is None else as_text(value, key, "a variable name")
    if not name:
        return None
    if not ENV_NAME.fullmatch(name):
        raise ConfigError(
            "must be a variable name (letters, digits and '_', not starting with a digit), "
            f"got {show(name)}",
            key=key,
        )
    prefix = next((p for p in RESERVED_ENV_PREFIXES if name.upper().startswith(p)), None)
    if prefix or name.upper() in RESERVED_ENV_NAMES:
        why = f"{prefix}* variables belong to the agent" if prefix else "the agent needs it"
        raise ConfigError(f'"{name}" is reserved ({why}); pick another, e.g. "DATA_DIR"', key=key)
    if any(m.env == name for m in existing):
        raise ConfigError(f'"{name}" is already used by another volume', key=key)
    return name


def validate_volume(
    host: object,
    container: object,
    env: object = None,
    existing: Sequence[VolumeConfig] = (),
    *,
    index: int | None = None,
) -> VolumeConfig:
    """Check one read-only dataset mount; the rules are those of `check_volume`.

    Returns:
        The mount with normalised paths; ``env`` is None when empty.

    Raises:
        ConfigError: one problem, or `ConfigErrors` when several fields are wrong.
    """
    host_path, container_path, env_name = check_volume(host, container, env, existing, index=index)
    return VolumeConfig(host=host_path, container=container_path, env=env_name)
