"""The line naming a fleet host over its dashboard: the host once, whole parts dropped first."""

from __future__ import annotations

import pytest

from gpuci_tui.widgets.fleet_table import host_name
from gpuci_tui.widgets.host_bar import host_bar

HOST = "gpu-node-17.lab.example.org"
FULL = f"⇄ ci@{HOST}:2222 over ssh · host 2 of 3  q/Esc: back to the fleet"


@pytest.mark.parametrize(
    ("width", "shown"),
    [
        (120, FULL),
        (len(FULL), FULL),
        (78, f"⇄ ci@{HOST}:2222 over ssh · host 2 of 3"),
        (46, f"⇄ ci@{HOST}:2222 over ssh"),
        (45, f"⇄ ci@{HOST}:2222"),
        (37, f"⇄ ci@{HOST}:2222"),
        (20, "⇄ ci@gpu-node-17.la…"),
    ],
)
def test_the_bar_drops_whole_parts_from_the_end(width: int, shown: str) -> None:
    line = host_bar(HOST, f"ci@{HOST}:2222", 2, 3, width)
    assert line.plain == shown
    assert line.cell_len <= width
    assert line.plain.count("gpu-node-17") == 1


def test_the_host_is_bold_and_named_once_or_an_alias_beside_its_target() -> None:
    name = host_name("gpu3", "ci@gpu3:2222")
    assert name.plain == "ci@gpu3:2222"
    assert [name.plain[s.start : s.end] for s in name.spans if s.style == "bold"] == ["gpu3"]
    assert host_name("a100", "ci@10.0.0.5").plain == "a100 ci@10.0.0.5"
