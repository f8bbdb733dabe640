"""``[agents] standby``: false, true, a depth or "auto" with its bounds; saved and read back."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config.loader import load_config, save_config
from tests.core.config_helpers import base_doc, problems, write


def loaded(tmp_path: Path, **agents: Any) -> Any:
    doc = base_doc()
    doc["agents"].update(agents)
    return load_config(write(tmp_path / "config.toml", doc)).agents


@pytest.mark.parametrize("value", [True, False, 0, 2, 7, "auto"])
def test_standby_values(tmp_path: Path, value: object) -> None:
    assert loaded(tmp_path, standby=value).standby == value


def test_auto_bounds_default_to_one_standby_at_idle(tmp_path: Path) -> None:
    agents = loaded(tmp_path, standby="auto")
    assert (agents.standby_min, agents.standby_max, agents.max_agents) == (2, 3, None)
    agents = loaded(tmp_path, standby="auto", standby_min=0, standby_max=5, max_agents=9)
    assert (agents.standby_min, agents.standby_max, agents.max_agents) == (0, 5, 9)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("standby", "yes", 'agents.standby: must be true, false, a whole number from 0 to 7 or "auto"'),
        ("standby", 8, "agents.standby: must be true, false, a whole number from 0 to 7"),
        ("standby", -1, "agents.standby: must be true, false"),
        ("standby_max", 8, "agents.standby_max: must be a whole number from 0 to 7, got 8"),
        ("standby_min", True, "agents.standby_min: must be a whole number from 0 to 7"),
        ("max_agents", 0, "agents.max_agents: must be a whole number of at least 1, got 0"),
    ],
)  # fmt: skip
def test_bad_values_say_what_is_allowed(
    tmp_path: Path, key: str, value: object, expected: str
) -> None:
    doc = base_doc()
    doc["agents"][key] = value
    assert any(line.startswith(expected) for line in problems(tmp_path, doc)), problems(
        tmp_path, doc
    )


def test_auto_is_saved_and_read_back(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "in.toml", base_doc()))
    agents = replace(config.agents, standby="auto", standby_max=2, max_agents=6)
    save_config(replace(config, agents=agents), tmp_path / "out.toml")
    again = load_config(tmp_path / "out.toml").agents
    assert (again.standby, again.standby_max, again.max_agents) == ("auto", 2, 6)


def test_a_floor_above_the_ceiling_is_refused_in_agents_and_in_a_group(tmp_path: Path) -> None:
    """Issue 28: standby_min = 4 above standby_max = 2 was accepted, and "auto" quietly kept 4."""
    doc = base_doc()
    doc["agents"].update(standby="auto", standby_min=4, standby_max=2)
    assert problems(tmp_path, doc) == [
        'agents.standby_min: is 4, above standby_max (2): "auto" keeps standby_min standbys '
        "while idle and at most standby_max; lower standby_min to 2 or raise standby_max"
    ]
    doc["agents"].update(standby_min=1, standby_max=2, gpus="none")
    doc["groups"] = {"a": {"standby_min": 4}, "b": {"standby": 1, "standby_min": 4}}
    assert problems(tmp_path, doc) == [
        'groups.a.standby_min: is 4, above standby_max (2): "auto" keeps standby_min standbys '
        "while idle and at most standby_max; lower standby_min to 2 or raise standby_max"
    ]
    # Without "auto" the bounds are not used: nothing to refuse.
    assert loaded(tmp_path, standby=1, standby_min=4).standby_min == 4
    # The default ceiling is named as one.
    doc = base_doc()
    doc["agents"].update(standby="auto", standby_min=5)
    assert problems(tmp_path, doc)[0].startswith(
        "agents.standby_min: is 5, above standby_max (3, the default)"
    )
