"""Host labels cut by what they share, so hosts stay told apart at any width."""

from __future__ import annotations

import pytest

from gpuci_tui.core.fleet.labels import common_domain, common_start, short_label, target_around
from gpuci_tui.core.formatting import cut_words

FQDN = ["gpu-node-a.example.com", "gpu-node-b.example.com", "gpu-node-c.example.com"]


def test_the_shared_domain_and_start_are_found_at_separators() -> None:
    assert common_domain(FQDN) == ".example.com"
    assert common_start(FQDN) == "gpu-node-"
    assert common_domain(["gpu2", "gpu3"]) == ""
    assert common_start(["127.0.0.1:40123", "127.0.0.1:40124"]) == "127.0.0.1:"
    assert common_domain(["a.example.com"]) == "" and common_start(["gpu-a"]) == ""
    assert common_start(["gpu", "gpu-2"]) == "", "never a whole label"


@pytest.mark.parametrize(
    ("width", "expected"),
    [
        (40, FQDN),
        (12, ["gpu-node-a", "gpu-node-b", "gpu-node-c"]),
        (8, ["…-node-a", "…-node-b", "…-node-c"]),
        (3, ["…-a", "…-b", "…-c"]),
        (2, ["…a", "…b", "…c"]),
    ],
)
def test_long_fqdns_stay_distinct_at_any_width(width: int, expected: list[str]) -> None:
    shown = [short_label(label, FQDN, width) for label in FQDN]
    assert shown == expected
    assert len(set(shown)) == len(FQDN)
    assert all(len(text) <= width for text in shown)


def test_ports_of_one_address_keep_the_port() -> None:
    labels = ["127.0.0.1:40123", "127.0.0.1:40124"]
    assert [short_label(x, labels, 8) for x in labels] == ["…1:40123", "…1:40124"]


def test_an_alias_or_a_short_name_is_shown_as_given() -> None:
    labels = ["a100", "gpu-node-b.example.com"]
    assert short_label("a100", labels, 8) == "a100"
    assert len(short_label("gpu-node-b.example.com", labels, 8)) == 8


def test_a_long_differing_part_is_cut_in_its_middle() -> None:
    labels = ["rack1-gpu-aaaaaaaaaaaa.x.org", "rack1-gpu-bbbbbbbbbbbb.x.org"]
    assert short_label(labels[0], labels, 8) == "…aaa…aaa"


def test_a_problem_in_the_table_is_cut_after_a_whole_word() -> None:
    reason = "unreachable: ssh: connect to host gpu-node-c.example.com port 22: Connection refused"
    assert cut_words(reason, 33) == "unreachable: ssh: connect to…"
    assert cut_words(reason, 200) == reason
    assert cut_words("x" * 40, 10) == "x" * 9 + "…"


@pytest.mark.parametrize(
    ("label", "target", "around"),
    [
        ("gpu3", "gpu3", ("", "")),
        ("gpu3", "ci@gpu3", ("ci@", "")),
        ("gpu3", "ci@gpu3:2222", ("ci@", ":2222")),
        ("gpu3:2222", "ci@gpu3:2222", ("ci@", "")),  # two ports of one host: the label has it
        ("::1", "ci@[::1]:22", ("ci@[", "]:22")),
        ("a100", "ci@10.0.0.5", None),  # an alias: both are shown
        ("gpu", "ci@gpu3", None),
        ("gpu3#2", "ci@gpu3", None),
    ],
)
def test_a_target_names_its_host_once(
    label: str, target: str, around: tuple[str, str] | None
) -> None:
    assert target_around(label, target) == around
    if around is not None:
        assert around[0] + label + around[1] == target
