"""The manifest YAML writer: what it writes reads back as the same data."""

from __future__ import annotations

import pytest
import yaml

from gpuci_tui.core.export.k8s_yaml import dump_documents, dump_yaml

TRICKY = [
    "", "1", "0400", "1.5", "1e3", "0x1f", "true", "True", "on", "Off", "yes", "n", "null", "~",
    "-m", "--once", "- x", "a: b", "a:b", "x #y", "#x", "*ref", "&anchor", "!tag", "@x", "`x`",
    "{a}", "[a]", "'q'", '"q"', "a\nb", "tab\there", " lead", "trail ", "ünï", "%x", "<<",
    "64Gi", "1Mi", "_work", "/run/azp/token", "https://dev.azure.com/acme", "repo/img:tag",
    "nvidia.com/gpu", "=", "?", "|", ">", "2001-01-01", "12:30", ".inf", "-.inf", ".nan",
]  # fmt: skip


@pytest.mark.parametrize("text", TRICKY)
def test_strings_read_back_as_the_same_string(text: str) -> None:
    doc = {"k": text, "list": [text], text or "empty-key": 1}
    assert yaml.safe_load(dump_yaml(doc)) == doc


def test_nested_structures_and_scalars_round_trip() -> None:
    doc = {
        "a": {"b": [1, {"c": True, "d": None, "e": []}, [2, 3]], "f": {}},
        "g": [{"h": [{"i": "j"}]}, "k"],
        "n": 0,
        "flag": False,
    }
    assert yaml.safe_load(dump_yaml(doc)) == doc


def test_plain_where_safe_quoted_where_not() -> None:
    text = dump_yaml({"image": "repo/img:tag", "count": "1", "mode": "0400", "on": "on"})
    assert "image: repo/img:tag\n" in text
    assert 'count: "1"\n' in text and 'mode: "0400"\n' in text and '"on": "on"\n' in text


def test_documents_have_a_comment_header_and_separators() -> None:
    text = dump_documents([{"a": 1}, {"b": 2}], "first line\nsecond")
    assert text.startswith("# first line\n# second\n---\n")
    assert list(yaml.safe_load_all(text)) == [{"a": 1}, {"b": 2}]
