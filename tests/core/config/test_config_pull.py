"""``[agents] pull`` and ``pull_check_interval``: defaults, rules, groups, round trip."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config.loader import load_config, save_config
from tests.core.config_helpers import base_doc, problems, with_value, write


def test_defaults_are_missing_and_five_minutes(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "c.toml", base_doc()))
    assert (config.agents.pull, config.agents.pull_check_interval) == ("missing", 300.0)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "pull",
            "allways",
            'agents.pull: must be "never" (never pull: the image must be on the host), '
            '"missing" (pull when it is not on the host) or "always" (pull when the registry '
            'has a newer digest for the tag), got "allways"; did you mean "always"?',
        ),
        (
            "pull",
            True,
            'agents.pull: must be "never" (never pull: the image must be on the host), '
            '"missing" (pull when it is not on the host) or "always" (pull when the registry '
            "has a newer digest for the tag), got true",
        ),
        (
            "pull_check_interval",
            5,
            "agents.pull_check_interval: must be a number of seconds from 10 to 86400 (how "
            'often, at most, pull = "always" asks the registry whether the tag moved), got 5',
        ),
        (
            "pull_check_interval",
            "5m",
            "agents.pull_check_interval: must be a number of seconds from 10 to 86400 (how "
            'often, at most, pull = "always" asks the registry whether the tag moved), got "5m"',
        ),
    ],
)
def test_bad_values_say_what_is_allowed(tmp_path: Path, key: str, value: Any, message: str) -> None:
    assert problems(tmp_path, with_value("agents", key, value)) == [message]


def test_groups_inherit_and_override(tmp_path: Path) -> None:
    doc = base_doc()
    doc["agents"].update(pull="always", pull_check_interval=60)
    doc["groups"] = {
        "a": {"count": 1, "name_prefix": "a", "gpus": ["0"]},
        "b": {"count": 1, "name_prefix": "b", "gpus": ["1"], "pull": "never"},
    }
    config = load_config(write(tmp_path / "c.toml", doc))
    got = {g.name: (g.agents.pull, g.agents.pull_check_interval) for g in config.groups}
    assert got == {"a": ("always", 60.0), "b": ("never", 60.0)}


def test_a_group_error_names_the_group(tmp_path: Path) -> None:
    doc = base_doc()
    doc["groups"] = {"a": {"count": 1, "name_prefix": "a", "pull": "sometimes"}}
    [line] = problems(tmp_path, doc)
    assert line.startswith('groups.a.pull: must be "never"')


def test_saved_and_loaded_unchanged(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "c.toml", base_doc()))
    changed = dataclasses.replace(
        config, agents=dataclasses.replace(config.agents, pull="always", pull_check_interval=900.0)
    )
    save_config(changed, tmp_path / "saved.toml")
    text = (tmp_path / "saved.toml").read_text()
    assert 'pull = "always"' in text and "pull_check_interval = 900.0" in text
    again = load_config(tmp_path / "saved.toml")
    assert again.agents == changed.agents
    # Defaults are not written: a later release's better default reaches the file.
    save_config(config, tmp_path / "plain.toml")
    assert "pull" not in (tmp_path / "plain.toml").read_text()
