"""``[gpu]`` and ``[history]``: defaults, exact messages, round trip through the file."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config.loader import (
    GpuConfig,
    HistoryConfig,
    config_to_toml,
    load_config,
    save_config,
    validate_config,
)
from tests.core.config_helpers import base_doc, full_config, problems, with_value, write


def test_defaults_when_the_sections_are_absent(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "config.toml", base_doc()))
    assert config.gpu == GpuConfig(sample_interval=1.0)
    assert config.history == HistoryConfig(keep_days=90, max_rows=100_000)


def test_values_are_read(tmp_path: Path) -> None:
    doc = base_doc()
    doc["gpu"] = {"sample_interval": 2}
    doc["history"] = {"keep_days": 30, "max_rows": 5000}
    config = load_config(write(tmp_path / "config.toml", doc))
    assert config.gpu.sample_interval == 2.0
    assert isinstance(config.gpu.sample_interval, float)
    assert config.history == HistoryConfig(keep_days=30, max_rows=5000)


@pytest.mark.parametrize(
    ("section", "key", "value", "message"),
    [
        (
            "gpu",
            "sample_interval",
            0,
            "gpu.sample_interval: must be a number of seconds from 0.1 to 3600 "
            "(1.0 = one sample per second), got 0",
        ),
        (
            "gpu",
            "sample_interval",
            "1s",
            "gpu.sample_interval: must be a number of seconds from 0.1 to 3600 "
            '(1.0 = one sample per second), got "1s"',
        ),
        (
            "gpu",
            "sample_interval",
            float("nan"),
            "gpu.sample_interval: must be a number of seconds from 0.1 to 3600 "
            "(1.0 = one sample per second), got nan",
        ),
        (
            "history",
            "keep_days",
            0,
            "history.keep_days: must be a whole number of days from 1 to 36500, got 0",
        ),
        (
            "history",
            "keep_days",
            True,
            "history.keep_days: must be a whole number of days from 1 to 36500, got true",
        ),
        (
            "history",
            "max_rows",
            10.5,
            "history.max_rows: must be a whole number from 1000 to 10000000, got 10.5",
        ),
    ],
)
def test_bad_values_name_the_key_and_the_range(
    tmp_path: Path, section: str, key: str, value: Any, message: str
) -> None:
    assert problems(tmp_path, with_value(section, key, value)) == [message]


def test_unknown_key_suggests(tmp_path: Path) -> None:
    assert problems(tmp_path, with_value("history", "keep_day", 3)) == [
        'history.keep_day: unknown key; did you mean "keep_days"? allowed: keep_days, max_rows'
    ]


def test_save_writes_only_changed_values_and_round_trips(tmp_path: Path) -> None:
    config = full_config(tmp_path)
    assert "[gpu]" not in config_to_toml(config)
    assert "[history]" not in config_to_toml(config)
    changed = dataclasses.replace(
        config, gpu=GpuConfig(sample_interval=0.5), history=HistoryConfig(max_rows=2000)
    )
    text = config_to_toml(changed)
    assert "[gpu]\nsample_interval = 0.5\n" in text
    assert "[history]\nmax_rows = 2000\n" in text
    assert "keep_days" not in text
    path = tmp_path / "config.toml"
    save_config(changed, path)
    assert dataclasses.replace(load_config(path), path=None) == changed


def test_in_memory_config_is_checked_too(tmp_path: Path) -> None:
    bad = dataclasses.replace(full_config(tmp_path), history=HistoryConfig(keep_days=-1))
    assert [str(e) for e in validate_config(bad)] == [
        "history.keep_days: must be a whole number of days from 1 to 36500, got -1"
    ]
