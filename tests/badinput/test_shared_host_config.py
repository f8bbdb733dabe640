"""A configuration another user could write is not obeyed; volumes never expose the host.

Probed as a second local user would: with the config file or its directory writable by
others, that user adds ``docker_socket = true`` and a volume ``host = "/"``, and a job reads
``/etc/shadow`` and the PAT file through it. The loader now refuses such a file (with the
command that fixes it) and refuses host paths that expose the host, whoever wrote them.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuci_tui.cli import exitcodes
from gpuci_tui.cli.main import main
from gpuci_tui.core.config.file import ConfigError, ConfigErrors
from gpuci_tui.core.config.loader import load_config
from tests.badinput.helpers import NOBODY, good_doc, save_good, write_toml

HOSTILE = """
[[agents.volumes]]
host = "/"
container = "/datasets/all"
"""


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every user can write (0777, no sticky bit), as a careless admin makes."""
    directory = Path(tempfile.mkdtemp(prefix="gpuci-open-"))
    directory.chmod(0o777)
    try:
        yield directory
    finally:
        subprocess.run(["rm", "-rf", str(directory)], check=False)


def refusal(path: Path) -> str:
    with pytest.raises((ConfigError, ConfigErrors)) as caught:
        load_config(path)
    return str(caught.value)


def test_a_config_file_others_can_write_is_refused_with_the_chmod(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    save_good(path)
    path.chmod(0o666)
    message = refusal(path)
    assert "can be written by other users (mode 0666)" in message
    assert f"chmod go-w {path}" in message
    path.chmod(0o644)
    load_config(path)  # the fix works


@pytest.mark.root
def test_another_user_replaces_the_file_in_an_open_directory_and_is_refused(
    open_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The second user really writes: through the open directory, a new hostile file."""
    path = open_dir / "config.toml"
    save_good(path)
    hostile = open_dir / "hostile.toml"
    write_toml(hostile, good_doc())
    text = hostile.read_text() + HOSTILE
    hostile.unlink()
    subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "sh", "-c",
         f"cat > {open_dir}/new.toml && mv -f {open_dir}/new.toml {path}"],
        input=text, text=True, check=True, timeout=30,
    )  # fmt: skip
    assert os.stat(path).st_uid == NOBODY, "the other user could replace the file"
    assert main(["--config", str(path), "check-config"]) == exitcodes.CONFIG
    err = capsys.readouterr().err
    assert "belongs to uid 65534, not to you" in err
    os.chown(path, 0, 0)  # even owned by us again, the directory stays open
    message = refusal(path)
    assert (
        f"which other users can write (mode 0777): they could replace the file; run: chmod go-w {open_dir}"
        in message
    )


def test_a_sticky_world_writable_directory_is_fine(tmp_path: Path) -> None:
    """Like /tmp: nobody else can replace a file of ours there."""
    directory = Path(tempfile.mkdtemp(prefix="gpuci-sticky-"))
    try:
        directory.chmod(0o1777)
        path = directory / "config.toml"
        save_good(path)
        load_config(path)
    finally:
        subprocess.run(["rm", "-rf", str(directory)], check=False)


@pytest.mark.parametrize(
    ("host", "why"),
    [
        ("/", "the host's whole file system"),
        ("/etc", "the host's /etc"),
        ("/etc/ssl", "the host's /etc"),
        ("/var", "the host's /var/run (inside /var)"),
        ("/var/run", "the host's /var/run"),
        ("/run/docker", "the host's /run"),
        ("/root/datasets", "the host's /root"),
        ("/var/lib/docker/volumes/x", "the host's /var/lib/docker"),
        ("/dev/shm", "the host's /dev"),
    ],
)
def test_host_paths_that_expose_the_host_are_refused(tmp_path: Path, host: str, why: str) -> None:
    doc = good_doc()
    doc["agents"]["volumes"] = [{"host": host, "container": "/datasets/x"}]
    path = tmp_path / "config.toml"
    write_toml(path, doc)
    message = refusal(path)
    assert f"{host} would give every job {why}" in message
    assert "agents.volumes[0].host" in message


@pytest.mark.parametrize("container", ["/run", "/run/secrets", "/var/run", "/proc/x", "/"])
def test_container_paths_over_the_system_are_refused(tmp_path: Path, container: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    doc = good_doc()
    doc["agents"]["volumes"] = [{"host": str(data), "container": container}]
    path = tmp_path / "config.toml"
    write_toml(path, doc)
    assert "is a system path in the container" in refusal(path)
