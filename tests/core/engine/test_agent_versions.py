"""Agent version rules: compare, read demands, warn (pure tables)."""

from __future__ import annotations

import pytest

from gpuci_tui.core.engine.agent_versions import (
    demanded_version,
    is_newer,
    newest,
    parse_version,
    version_warnings,
)


@pytest.mark.parametrize(
    ("candidate", "than", "newer"),
    [
        ("4.270.0", "4.264.2", True),
        ("4.264.10", "4.264.9", True),  # numbers, not text
        ("4.264.2", "4.264.2", False),
        ("4.261.0", "4.264.2", False),
        ("4.270.0", None, True),  # an image without the label is older than any version
        ("4.270.0", "", True),
        ("not-a-version", "4.1.1", False),
        (None, "4.1.1", False),
    ],
)
def test_is_newer(candidate: str | None, than: str | None, newer: bool) -> None:
    assert is_newer(candidate, than) is newer


def test_parse_and_newest() -> None:
    assert parse_version(" v4.270.1 ") == (4, 270, 1)
    assert parse_version("4.270") is None
    assert newest(["4.264.2", None, "4.270.0", "junk", "4.9.99"]) == "4.270.0"
    assert newest([None, "junk"]) is None


def test_the_highest_agent_version_demand_counts() -> None:
    demands = [
        "cuda",
        "Agent.Version -gtVersion 2.182.1",
        "agent.version -gtversion 4.270.0",
        "Agent.Version -gtVersion junk",
        "Agent.OS -equals Linux",
    ]
    assert demanded_version(demands) == "4.270.0"
    assert demanded_version(["cuda"]) is None


def test_warnings() -> None:
    same = version_warnings("4.264.2", {"a": "4.264.2"})
    assert same == []
    [older] = version_warnings("4.270.0", {"a": "4.264.2", "b": "4.270.0"})
    assert older == (
        "group a's image has agent 4.264.2; the organisation offers 4.270.0: rebuild the image "
        "(dockeragent/build.sh pin-agent 4.270.0)"
    )
    [cached] = version_warnings("4.270.0", {"a": "4.264.2"}, cached="4.270.0")
    assert cached.endswith("; meanwhile new agent containers use the cached package 4.270.0")
    [demand] = version_warnings("4.264.2", {"a": "4.264.2"}, demanded="4.266.0")
    assert demand.startswith("queued jobs demand agent 4.266.0 but group a's image has 4.264.2")
    # The cached package meets the demand: nothing bites, only the rebuild advice remains.
    [advice] = version_warnings("4.270.0", {"a": "4.264.2"}, "4.266.0", "4.270.0")
    assert advice.startswith("group a's image has agent 4.264.2; the organisation offers")
    # An image that does not name its agent (not built by build.sh) is not compared.
    assert version_warnings("4.270.0", {"a": None}, demanded="4.266.0") == []
