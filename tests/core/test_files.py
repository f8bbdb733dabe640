"""`atomic_write`: the one writer of the config, the intent, the GPU faults and the PAT file."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from unittest import mock

import pytest

from gpuci_tui.core.files import atomic_write


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_writes_the_whole_content_with_the_mode_asked(tmp_path: Path) -> None:
    target = tmp_path / "pat"
    atomic_write(target, "secret\n")
    assert target.read_text() == "secret\n"
    assert _mode(target) == 0o600
    atomic_write(target, b"public", mode=0o644)
    assert target.read_bytes() == b"public"
    assert _mode(target) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pat"], "no temp file is left"


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "config.toml"
    target.write_text("old")
    with (
        mock.patch("gpuci_tui.core.files.os.replace", side_effect=OSError(28, "No space")),
        pytest.raises(OSError),
    ):
        atomic_write(target, "new")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]


def test_the_file_and_its_directory_are_fsynced(tmp_path: Path) -> None:
    synced: list[int] = []
    real = os.fsync
    with mock.patch(
        "gpuci_tui.core.files.os.fsync", side_effect=lambda fd: (synced.append(fd), real(fd))
    ):
        atomic_write(tmp_path / "intent.json", "{}")
    assert len(synced) == 2, "the file, then the directory (so the rename survives a power cut)"


def test_a_symlink_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("keep")
    target = tmp_path / "pat"
    target.symlink_to(elsewhere)
    atomic_write(target, "secret")
    assert not target.is_symlink() and target.read_text() == "secret"
    assert elsewhere.read_text() == "keep"
