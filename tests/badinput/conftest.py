"""Fixtures shared by both halves of the bad-input corpus."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.badinput.helpers import Snapshot, save_good


@pytest.fixture
def good_dir(tmp_path: Path) -> Iterator[Path]:
    """A configuration directory holding a good config.toml; must be untouched at the end."""
    directory = tmp_path / "cfg"
    save_good(directory / "config.toml")
    before = Snapshot(directory)
    yield directory / "config.toml"
    before.assert_unchanged()
