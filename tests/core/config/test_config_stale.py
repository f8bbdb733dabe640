"""``[azure] remove_offline_after``: a duration, off by default, with clear messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuci_tui.core.config.file import ConfigError
from gpuci_tui.core.config.loader import load_config, save_config
from gpuci_tui.core.config.validate import validate_remove_offline_after
from tests.core.config_helpers import base_doc, problems, with_value, write


def test_off_by_default(tmp_path: Path) -> None:
    assert load_config(write(tmp_path / "c.toml", base_doc())).azure.remove_offline_after is None


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("7d", 604800.0), ("12h", 43200.0), ("90m", 5400.0), ("2w", 1209600.0), ("1.5d", 129600.0),
     (" 600s ", 600.0), (3600, 3600.0), ("3600", 3600.0), ("1D", 86400.0)],
)  # fmt: skip
def test_durations(value: object, seconds: float) -> None:
    assert validate_remove_offline_after(value) == seconds


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("soon", 'must be a duration, e.g. "7d" (units s, m, h, d, w); got "soon"'),
        ("7 days", "must be a duration"),
        (True, "must be a duration"),
        ("30s", "must be at least 1 minute"),
        (0, "must be at least 1 minute"),
        (-5, "must be at least 1 minute"),
        (float("nan"), "must be at least 1 minute"),
        (float("inf"), "must be at least 1 minute"),
    ],
)
def test_bad_values_say_what_to_write(value: object, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_remove_offline_after(value)
    assert words in str(info.value)
    assert info.value.key == "azure.remove_offline_after"


def test_a_bad_value_in_the_file_names_the_key(tmp_path: Path) -> None:
    [line] = problems(tmp_path, with_value("azure", "remove_offline_after", "a week"))
    assert line.startswith("azure.remove_offline_after: must be a duration")


def test_saved_and_loaded_again(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path / "c.toml", with_value("azure", "remove_offline_after", "7d"))
    )
    assert config.azure.remove_offline_after == 604800.0
    save_config(config, tmp_path / "again.toml")
    assert load_config(tmp_path / "again.toml").azure.remove_offline_after == 604800.0
