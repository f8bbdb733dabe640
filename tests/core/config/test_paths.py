"""XDG locations, config path precedence, and the private runtime directory."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
from pathlib import Path

import pytest

from gpuci_tui.core.config import paths
from gpuci_tui.core.config.loader import ConfigError
from gpuci_tui.core.config.paths import PathError

OTHER_UID = 54321


def env(name: str) -> Path:
    return Path(os.environ[name])


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_default_config_path_is_under_xdg_config_home() -> None:
    assert paths.default_config_path() == env("XDG_CONFIG_HOME") / "gpuci-tui" / "config.toml"


def test_config_path_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    environ = {"GPUCI_CONFIG": str(tmp_path / "from-env.toml")}
    assert paths.resolve_config_path(str(tmp_path / "cli.toml"), environ) == tmp_path / "cli.toml"
    assert paths.resolve_config_path(None, environ) == tmp_path / "from-env.toml"
    assert paths.resolve_config_path(None, {}) == paths.default_config_path()
    assert paths.resolve_config_path(None, {"GPUCI_CONFIG": "  "}) == paths.default_config_path()
    monkeypatch.setenv("GPUCI_CONFIG", str(tmp_path / "real-env.toml"))
    assert paths.resolve_config_path(None) == tmp_path / "real-env.toml"


def test_config_paths_are_expanded_and_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert paths.resolve_config_path("~/gpu.toml", {}) == tmp_path / "gpu.toml"
    assert paths.resolve_config_path("rel/gpu.toml", {}) == tmp_path / "rel" / "gpu.toml"
    assert paths.resolve_config_path(None, {"GPUCI_CONFIG": "~/e.toml"}) == tmp_path / "e.toml"


def test_empty_config_option_is_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        paths.resolve_config_path("", {})
    assert str(info.value) == (
        '--config was given an empty path; give a file, e.g. "--config ~/gpu.toml"'
    )


def test_state_log_and_data_directories_are_created_private() -> None:
    state = paths.state_dir()
    assert state == env("XDG_STATE_HOME") / "gpuci-tui"
    assert paths.log_dir() == state / "log"
    assert paths.data_dir() == env("XDG_DATA_HOME") / "gpuci-tui"
    for directory in (state, paths.log_dir(), paths.data_dir()):
        assert directory.is_dir() and mode(directory) == 0o700
    assert paths.lock_path("0123456789ab") == state / "0123456789ab.lock"
    assert paths.history_db_path() == state / "history.sqlite3"


def test_cryptfile_path_does_not_create_anything() -> None:
    path = paths.cryptfile_path()
    assert path == env("XDG_DATA_HOME") / "gpuci-tui" / "pat-store.cfg"
    assert not path.parent.exists()


def test_state_dir_that_cannot_be_created(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "file"))
    with pytest.raises(PathError) as info:
        paths.state_dir()
    assert str(info.value) == (
        f"cannot create the directory {tmp_path}/file/gpuci-tui (Not a directory, ENOTDIR)"
    )


def test_runtime_dir_uses_xdg_runtime_dir() -> None:
    run = paths.runtime_dir()
    assert run == env("XDG_RUNTIME_DIR") / "gpuci-tui"
    assert mode(run) == 0o700 and run.stat().st_uid == os.geteuid()


@pytest.mark.parametrize("value", ["", "/no/such/dir", "relative/run", "OTHER_USER"])
def test_runtime_dir_falls_back_to_the_state_dir(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if value == "OTHER_USER":
        other = tmp_path / "other"
        other.mkdir(mode=0o700)
        os.chown(other, OTHER_UID, OTHER_UID)
        value = str(other)
    monkeypatch.setenv("XDG_RUNTIME_DIR", value)
    run = paths.runtime_dir()
    assert run == env("XDG_STATE_HOME") / "gpuci-tui" / "run"
    assert mode(run) == 0o700


def test_runtime_dir_open_to_others_is_refused() -> None:
    run = env("XDG_RUNTIME_DIR") / "gpuci-tui"
    run.mkdir()
    run.chmod(0o755)
    with pytest.raises(PathError) as info:
        paths.runtime_dir()
    assert str(info.value) == (
        f"{run} has mode 0755 but must be private (0700), as it holds the supervisor's control "
        f"socket: run chmod 700 {run}"
    )


def test_runtime_dir_of_another_user_is_refused() -> None:
    run = env("XDG_RUNTIME_DIR") / "gpuci-tui"
    run.mkdir(mode=0o700)
    os.chown(run, OTHER_UID, OTHER_UID)
    with pytest.raises(PathError) as info:
        paths.runtime_dir()
    assert str(info.value) == (
        f"{run} belongs to uid {OTHER_UID}, not to you (uid {os.geteuid()}); someone else could "
        "control your agents through it: remove it, or set XDG_RUNTIME_DIR to a directory of yours"
    )


def test_runtime_dir_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    run = env("XDG_RUNTIME_DIR") / "gpuci-tui"
    run.symlink_to(target)
    with pytest.raises(PathError) as info:
        paths.runtime_dir()
    assert str(info.value) == (
        f"{run} is a symbolic link; it must be a private directory: remove it (rm {run})"
    )


def test_socket_path_is_in_the_runtime_dir_and_bindable() -> None:
    path = paths.socket_path("0123456789ab")
    assert path == env("XDG_RUNTIME_DIR") / "gpuci-tui" / "0123456789ab.sock"
    assert len(os.fsencode(path)) < paths.SOCKET_PATH_MAX
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))


def test_socket_path_falls_back_to_a_short_private_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True, mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))
    # Short for real: tmp_path is deeper under a pytest-xdist worker (…/popen-gw1/…).
    short = Path(tempfile.mkdtemp(prefix="gpuci-s-", dir="/tmp"))
    monkeypatch.setattr(paths, "SHORT_SOCKET_BASE", short)
    try:
        path = paths.socket_path("0123456789ab")

        assert path == short / f"gpuci-tui-{os.geteuid()}" / "0123456789ab.sock"
        assert mode(path.parent) == 0o700
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            server.bind(str(path))
    finally:
        shutil.rmtree(short, ignore_errors=True)


def test_socket_path_too_long_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deep = tmp_path / ("d" * 100)
    deep.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))
    monkeypatch.setattr(paths, "SHORT_SOCKET_BASE", deep)
    with pytest.raises(PathError, match="set XDG_RUNTIME_DIR to a short directory of yours"):
        paths.socket_path("0123456789ab")


@pytest.mark.parametrize("instance", ["../evil", "", "a/b", ".hidden"])
def test_instance_ids_cannot_escape_the_directory(instance: str) -> None:
    with pytest.raises(PathError, match="invalid instance id"):
        paths.socket_path(instance)
    with pytest.raises(PathError, match="invalid instance id"):
        paths.lock_path(instance)


def test_the_state_dir_made_as_the_log_dirs_parent_is_private_too() -> None:
    """``log_dir()`` first used to create the state directory with the umask's 0755."""
    log = paths.log_dir()
    assert mode(log.parent) == 0o700 == mode(log)


def test_a_state_dir_of_ours_open_to_others_is_tightened() -> None:
    state = paths.state_dir()
    state.chmod(0o755)
    assert paths.state_dir() == state and mode(state) == 0o700


def test_the_history_is_created_0600_and_tightened(tmp_path: Path) -> None:
    from gpuci_tui.core.store.schema import open_writer

    path = tmp_path / "history.sqlite3"
    open_writer(path).close()
    assert mode(path) == 0o600
    path.chmod(0o644)
    open_writer(path).close()
    assert mode(path) == 0o600


def test_a_runtime_base_others_can_write_without_the_sticky_bit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user could rename our directory away and put a socket of theirs in its place."""
    base = tmp_path / "run"
    base.mkdir()
    base.chmod(0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base))
    with pytest.raises(PathError, match=f"has no sticky bit.*chmod \\+t {base}"):
        paths.runtime_dir()
    base.chmod(0o1777)
    assert paths.runtime_dir() == base / "gpuci-tui"
