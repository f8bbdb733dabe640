"""``gpu_admission`` and ``gpu_hold_down``: parsed, checked with clear messages, written back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config.loader import load_config, save_config
from gpuci_tui.core.engine.gpu_admission import EXCLUSIVE, LIMITS, OFF, GpuAdmission

from .config_helpers import base_doc, problems, write


def _load(tmp_path: Path, **agents: Any) -> Any:
    doc = base_doc()
    doc["agents"].update(agents)
    return load_config(write(tmp_path / "config.toml", doc))


def test_default_is_exclusive_with_a_ten_second_hold_down(tmp_path: Path) -> None:
    config = _load(tmp_path)
    assert config.agents.gpu_admission == GpuAdmission(EXCLUSIVE)
    assert config.agents.gpu_hold_down == 10.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("off", GpuAdmission(OFF)),
        ("exclusive", GpuAdmission(EXCLUSIVE)),
        (
            {"foreign_memory_max": "8GiB", "foreign_util_max": 20},
            GpuAdmission(LIMITS, 8192.0, "8GiB", 20.0),
        ),
        ({"foreign_memory_max": "512 MiB"}, GpuAdmission(LIMITS, 512.0, "512 MiB", None)),
        ({"foreign_util_max": 5.5}, GpuAdmission(LIMITS, None, "", 5.5)),
    ],
)
def test_admission_values(tmp_path: Path, value: object, expected: GpuAdmission) -> None:
    assert _load(tmp_path, gpu_admission=value).agents.gpu_admission == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "shared",
            'agents.gpu_admission: must be "exclusive", "off" or { foreign_memory_max = "8GiB", '
            'foreign_util_max = 20 }, got "shared"',
        ),
        (
            {"foreign_memory": "8GiB"},
            "agents.gpu_admission: has unknown key foreign_memory; a limits table takes "
            "foreign_memory_max and/or foreign_util_max",
        ),
        (
            {"foreign_memory_max": 8},
            'agents.gpu_admission.foreign_memory_max: must be a size with a unit in quotes, like "8GiB"',
        ),
        (
            {"foreign_util_max": 120},
            "agents.gpu_admission.foreign_util_max: must be a percentage from 0 to 100",
        ),
    ],
)
def test_bad_admission_says_key_problem_and_allowed(
    tmp_path: Path, value: object, message: str
) -> None:
    doc = base_doc()
    doc["agents"]["gpu_admission"] = value
    (line,) = problems(tmp_path, doc)
    assert line.startswith(message), line


@pytest.mark.parametrize("value", [-1, 4000, True, "10"])
def test_bad_hold_down(tmp_path: Path, value: object) -> None:
    doc = base_doc()
    doc["agents"]["gpu_hold_down"] = value
    (line,) = problems(tmp_path, doc)
    assert line.startswith("agents.gpu_hold_down: must be a number of seconds from 0 to 3600")


def test_group_values_are_kept_when_written_back(tmp_path: Path) -> None:
    doc = base_doc()
    doc["agents"]["gpu_admission"] = {"foreign_memory_max": "8GiB", "foreign_util_max": 20}
    doc["agents"]["gpu_hold_down"] = 3
    doc["groups"] = {
        "big": {"count": 1, "gpus": [0], "gpu_admission": "exclusive"},
        "small": {"count": 1, "gpus": [1], "gpu_admission": "off", "gpu_hold_down": 0},
    }
    config = load_config(write(tmp_path / "config.toml", doc))
    assert [g.agents.gpu_admission.mode for g in config.groups] == [EXCLUSIVE, OFF]
    assert [g.agents.gpu_hold_down for g in config.groups] == [3.0, 0.0]
    save_config(config, tmp_path / "again" / "config.toml")
    again = load_config(tmp_path / "again" / "config.toml")
    assert again.agents == config.agents
    assert again.groups == config.groups


def test_default_admission_is_not_written(tmp_path: Path) -> None:
    config = _load(tmp_path)
    save_config(config, tmp_path / "again" / "config.toml")
    assert "gpu_admission" not in (tmp_path / "again" / "config.toml").read_text()
