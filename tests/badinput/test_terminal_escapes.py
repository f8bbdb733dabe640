"""Control characters are shown, never obeyed: CLI output escapes them, names refuse them.

A container's log tail, an agent name or a configuration value with ESC in it would
otherwise be a command to the operator's terminal (clear the screen, set the window
title, move the cursor over what ``status`` shows).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.cli.safe_output import escape_controls
from gpuci_tui.core.config.file import ConfigError, ConfigErrors
from gpuci_tui.core.config.loader import load_config
from tests.badinput.helpers import good_doc, write_toml
from tests.fixture_images import derived_image
from tests.real.rig import Rig, make_rig, wait_for

HOSTILE_OUTPUT = r"printf '\033]0;owned\007\033[2Jcleared\r\n'; exit 1"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain\ttext\n", "plain\ttext\n"),
        ("\x1b[2J", "\\x1b[2J"),
        ("a\rb", "a\\x0db"),
        ("nul\x00", "nul\\x00"),
        ("c1\x9b31m", "c1\\x9b31m"),
        ("del\x7f", "del\\x7f"),
        ("ünïcødé ✓", "ünïcødé ✓"),
    ],
)
def test_escape_controls(text: str, shown: str) -> None:
    assert escape_controls(text) == shown


@pytest.mark.parametrize("pool", ["gpu\x1b[2J", "gpu\x00", "gpu\npool", "gpu\x9b"])
def test_a_pool_name_with_a_control_character_is_refused(tmp_path: Path, pool: str) -> None:
    doc = good_doc()
    doc["azure"]["pool"] = pool
    path = tmp_path / "config.toml"
    write_toml(path, doc)
    with pytest.raises((ConfigError, ConfigErrors), match="contains the control character U\\+"):
        load_config(path)


@pytest.fixture
def hostile_rig(tmp_path: Path, docker_client: Any, busybox_image: str) -> Iterator[Rig]:
    image = derived_image(
        docker_client,
        busybox_image,
        "gpuci-fixture/escapes:1",
        [f"ENTRYPOINT {json.dumps(['sh', '-c', HOSTILE_OUTPUT])}"],
        command=["true"],
    )
    yield from make_rig(
        tmp_path,
        docker_client,
        image,
        count=1,
        agents={"standby": False},
        park_after=3,
    )


def parked_with_tail(rig: Rig) -> None:
    """Wait for the slot parked with its last exit's log tail (status prints only that one).

    Parked lasts, and so does its tail once read: the supervisor removes a failed
    container only after reading it (no auto-remove), so the tail is never lost; it
    may arrive a moment after the slot parks.
    """
    wait_for(
        lambda: rig.states() == ["parked"] and (rig.slot(0).get("last_exit") or {}).get("log_tail"),
        150,
        "the slot parked with its log tail",
    )


@pytest.mark.daemon
@pytest.mark.docker
def test_status_shows_a_log_tails_escape_sequences_as_text(hostile_rig: Rig) -> None:
    rig = hostile_rig
    rig.start_daemon()
    parked_with_tail(rig)
    out = rig.cli("status")
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout and "\r" not in out.stdout
    assert "\\x1b]0;owned\\x07\\x1b[2Jcleared" in out.stdout, out.stdout
    # JSON keeps the bytes, escaped the JSON way, for programs that read it.
    as_json = rig.cli("status", "--json")
    assert "\x1b" not in as_json.stdout
    tail = json.loads(as_json.stdout)["slots"][0]["last_exit"]["log_tail"]
    assert any("\x1b[2Jcleared" in line for line in tail), tail
