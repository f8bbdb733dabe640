"""docs/configuration.md is the configuration schema, regenerated: it fails when they drift."""

from __future__ import annotations

import dataclasses
import difflib
import re
from pathlib import Path

import pytest

from gpuci_tui.cli.config_reference import MODELS, REGENERATE, main, render, section_keys
from gpuci_tui.core.config import loader

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "configuration.md"


def drift(text: str, expected: str) -> str | None:
    """Why ``text`` is not the reference the schema makes (None when it is), with the fix."""
    if text == expected:
        return None
    diff = "".join(
        list(difflib.unified_diff(text.splitlines(True), expected.splitlines(True), n=0))[:20]
    )
    return f"docs/configuration.md differs from the schema; regenerate it: {REGENERATE}\n{diff}"


def test_the_reference_is_the_schema() -> None:
    problem = drift(REFERENCE.read_text(encoding="utf-8"), render())
    assert problem is None, problem


def test_a_reference_edited_by_hand_or_a_new_key_is_drift() -> None:
    expected = render()
    by_hand = expected.replace("a whole number from 1 to 64", "a whole number from 1 to 99")
    problem = drift(by_hand, expected)
    assert problem is not None and REGENERATE in problem and "1 to 99" in problem
    missing_key = "\n".join(line for line in expected.splitlines() if "`agents.pull`" not in line)
    assert drift(missing_key + "\n", expected) is not None


def test_every_key_the_loader_reads_is_in_the_reference() -> None:
    text = render()
    for dotted in loader._FIELDS:
        assert f"| `{dotted}` |" in text, dotted
    for section in loader._SECTIONS:
        assert f"## [{section}" in text, section


@pytest.mark.parametrize("section", list(MODELS))
def test_every_key_has_a_description_in_the_schema(section: str) -> None:
    """A key without one gets it in the schema (its dataclass field's docstring), once."""
    undescribed = [doc.key for doc in section_keys(section) if not doc.description]
    assert undescribed == [], f"add a docstring under these fields of {MODELS[section]}"


def test_defaults_are_the_dataclasses() -> None:
    rows = {doc.key: doc for doc in section_keys("supervisor")}
    for field in dataclasses.fields(MODELS["supervisor"]):
        assert rows[f"supervisor.{field.name}"].default == f"`{field.default!r}`"


def test_the_command_writes_the_file(tmp_path: Path) -> None:
    target = tmp_path / "configuration.md"
    assert main([str(target)]) == 0
    assert target.read_text(encoding="utf-8") == render()
    assert re.search(
        r"^\| `agents\.pull` .* `\"never\"`, `\"missing\"`, `\"always\"` ", render(), re.M
    )
