"""Where gpuci-tui keeps its files: XDG locations (platformdirs), created private.

The runtime directory holds the supervisor's control socket: whoever can
connect to it can drain and restart agents, so it must belong to us and be
closed to everyone else. It is verified every time, never assumed.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

import platformdirs

from gpuci_tui.core.config.file import ConfigError, os_reason
from gpuci_tui.core.errors import GpuciError

APP = "gpuci-tui"
SOCKET_PATH_MAX = 100
"""A Unix socket path must fit ``sun_path`` (108 bytes on Linux, 104 on macOS)."""
SHORT_SOCKET_BASE = Path("/tmp")
"""Fallback base for sockets when the runtime directory's path is too long."""
_INSTANCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class PathError(GpuciError):
    """A directory of ours cannot be created, or is not private to us."""


def default_config_path() -> Path:
    """``$XDG_CONFIG_HOME/gpuci-tui/config.toml`` (platformdirs' user config path)."""
    return platformdirs.user_config_path(APP, appauthor=False) / "config.toml"


def resolve_config_path(cli_value: str | None, environ: Mapping[str, str] = os.environ) -> Path:
    """The config file to use: ``--config`` beats ``$GPUCI_CONFIG`` beats the default.

    ``~`` is expanded and a relative path is made absolute (a daemon may change
    directory later). An empty ``GPUCI_CONFIG`` counts as unset.

    Raises:
        ConfigError: ``--config`` was given an empty value.
    """
    if cli_value is not None:
        if not cli_value.strip():
            raise ConfigError(
                '--config was given an empty path; give a file, e.g. "--config ~/gpu.toml"'
            )
        return _absolute(cli_value)
    from_env = environ.get("GPUCI_CONFIG", "")
    return _absolute(from_env) if from_env.strip() else default_config_path()


def _absolute(value: str) -> Path:
    return Path(value.strip()).expanduser().absolute()


def state_dir() -> Path:
    """``$XDG_STATE_HOME/gpuci-tui`` (lock files, history), private: 0700.

    A looser directory of ours is tightened (it may have been made as the parent
    of the log directory, or by an older version): the history and intent in it
    are nobody else's business.
    """
    return _tighten(_make_dir(platformdirs.user_state_path(APP, appauthor=False)))


def log_dir() -> Path:
    """Platformdirs' user log directory (``$XDG_STATE_HOME/gpuci-tui/log``), created 0700."""
    state_dir()  # first: made as a mere parent, it would get the umask's mode
    return _tighten(_make_dir(platformdirs.user_log_path(APP, appauthor=False)))


def data_dir() -> Path:
    """``$XDG_DATA_HOME/gpuci-tui`` (the encrypted PAT store), created 0700."""
    return _make_dir(platformdirs.user_data_path(APP, appauthor=False))


def cryptfile_path() -> Path:
    """Default file of the encrypted PAT store (the directory is not created here)."""
    return platformdirs.user_data_path(APP, appauthor=False) / "pat-store.cfg"


def lock_path(instance: str) -> Path:
    """The lock file that keeps one supervisor per agent set (in `state_dir`)."""
    return state_dir() / f"{_checked_instance(instance)}.lock"


def history_db_path() -> Path:
    """The job history database (in `state_dir`)."""
    return state_dir() / "history.sqlite3"


def runtime_dir() -> Path:
    """A private directory for sockets: ``$XDG_RUNTIME_DIR/gpuci-tui``, else ``state_dir()/run``.

    ``XDG_RUNTIME_DIR`` is used when it is set to an existing directory of ours
    that we can write (an SSH session without a systemd login often has none).

    Raises:
        PathError: the directory cannot be created, or exists but is a symlink,
            not ours, or open to group or others (with the command that fixes it).
    """
    base = os.environ.get("XDG_RUNTIME_DIR", "")
    if base and _usable_base(Path(base)):
        return _private_dir(Path(base) / APP)
    return _private_dir(state_dir() / "run")


def socket_path(instance: str) -> Path:
    """The control socket of the supervisor of ``instance`` (see `config.instance_id`).

    Normally ``runtime_dir()/{instance}.sock``. A Unix socket path must stay
    under 100 bytes; when the runtime directory's path is too long (a deep
    ``$HOME``), a private ``/tmp/gpuci-tui-{uid}`` is used instead.

    Raises:
        PathError: no private directory gives a short enough path.
    """
    name = f"{_checked_instance(instance)}.sock"
    path = runtime_dir() / name
    if len(os.fsencode(path)) < SOCKET_PATH_MAX:
        return path
    path = _private_dir(SHORT_SOCKET_BASE / f"{APP}-{os.geteuid()}") / name
    if len(os.fsencode(path)) < SOCKET_PATH_MAX:
        return path
    raise PathError(
        f"the control socket path {path} is longer than {SOCKET_PATH_MAX - 1} bytes; "
        "set XDG_RUNTIME_DIR to a short directory of yours"
    )


def _checked_instance(instance: str) -> str:
    # The id becomes a file name: refuse anything that could leave the directory.
    if not _INSTANCE.fullmatch(instance):
        raise PathError(
            f"invalid instance id {instance!r}: expected letters, digits, '_', '.', '-'"
        )
    return instance


def _usable_base(base: Path) -> bool:
    try:
        info = base.stat()
    except OSError:
        return False
    return (
        base.is_absolute()
        and stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.geteuid()
        and os.access(base, os.W_OK | os.X_OK)
    )


def _make_dir(path: Path) -> Path:
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise PathError(f"cannot create the directory {path} ({os_reason(exc)})") from None
    if not path.is_dir():
        raise PathError(f"{path} exists but is not a directory; move it away")
    return path


def _tighten(path: Path) -> Path:
    """Make a directory of ours that is open to group or others 0700 (others' we leave alone)."""
    try:
        info = path.stat()
        if info.st_uid == os.geteuid() and info.st_mode & 0o077:
            path.chmod(0o700)
    except OSError as exc:
        raise PathError(f"cannot make {path} private ({os_reason(exc)})") from None
    return path


def _check_base(base: Path) -> None:
    """Refuse a directory to hold ours that others can write without the sticky bit.

    Without the sticky bit another user can rename our private directory away
    and put theirs (or a socket of theirs) in its place.
    """
    try:
        info = base.stat()
    except OSError:
        return
    if info.st_mode & 0o002 and not info.st_mode & stat.S_ISVTX:
        raise PathError(
            f"{base} can be written by every user and has no sticky bit: another user could "
            f"replace gpuci-tui's directory in it and lock you out; run: chmod +t {base} "
            "(or set XDG_RUNTIME_DIR to a directory of yours)"
        )


def _private_dir(path: Path) -> Path:
    """Create ``path`` with mode 0700, then check it is a real directory, ours, closed to others."""
    _make_dir(path.parent)
    _check_base(path.parent)
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        info = path.lstat()
    except OSError as exc:
        raise PathError(f"cannot create the directory {path} ({os_reason(exc)})") from None
    uid = os.geteuid()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        problem = "is a symbolic link" if stat.S_ISLNK(info.st_mode) else "is not a directory"
        raise PathError(f"{path} {problem}; it must be a private directory: remove it (rm {path})")
    if info.st_uid != uid:
        raise PathError(
            f"{path} belongs to uid {info.st_uid}, not to you (uid {uid}); someone else could "
            f"control your agents through it: remove it, or set XDG_RUNTIME_DIR to a directory of yours"
        )
    if info.st_mode & 0o077:
        raise PathError(
            f"{path} has mode {stat.S_IMODE(info.st_mode):04o} but must be private (0700), as it "
            f"holds the supervisor's control socket: run chmod 700 {path}"
        )
    return path
