"""Strict values: a boolean is no count, only ASCII digits make a port, zones are names,
and a file nested thousands deep gets one line, not a 193 KB traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuci_tui.core.config.file import ConfigError, is_ascii_number
from gpuci_tui.core.config.fleet_host import parse_target
from gpuci_tui.core.config.observe import parse_listen
from gpuci_tui.core.wire import command_from_dict


@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_is_no_count_on_the_control_socket(value: bool) -> None:
    with pytest.raises(ValueError, match="expected a whole number"):
        command_from_dict({"type": "scale", "count": value})
    assert command_from_dict({"type": "scale", "count": 3}).count == 3  # type: ignore[union-attr]


def test_saved_intent_with_a_boolean_count_is_ignored() -> None:
    from gpuci_tui.core.engine.commands import restore_intent
    from gpuci_tui.core.engine.lifecycle import EngineState

    state = EngineState(prefix="gpu", desired=2)
    assert restore_intent(state, {"count": True, "drained": [True]}).desired == 2


@pytest.mark.parametrize("text", ["²", "٣", "1²", "", "-1", "1.0", " 1"])
def test_only_ascii_digits_make_a_number(text: str) -> None:
    assert not is_ascii_number(text)
    assert is_ascii_number("9464")


@pytest.mark.parametrize("listen", ["127.0.0.1:²", "127.0.0.1:٩٤٦٤"])
def test_a_listen_port_in_other_digits_is_a_clear_error(listen: str) -> None:
    with pytest.raises(ConfigError, match="port"):
        parse_listen(listen)


@pytest.mark.parametrize("target", ["h:²", "ci@gpu2:²²"])
def test_a_host_port_in_other_digits_is_a_clear_error(target: str) -> None:
    with pytest.raises(ConfigError, match="has an invalid port"):
        parse_target(target, "--host")


def test_host_option_with_other_digits_prints_one_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gpuci_tui.cli.main", "--host", "h:²"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert out.returncode != 0
    assert "Traceback" not in out.stderr and "ValueError" not in out.stderr
    assert "invalid port" in out.stderr or "needs a terminal" in out.stderr, out.stderr


@pytest.mark.parametrize("zone", ["$(id)", "a;b", "eth0 -oProxyCommand=x", "x" * 16, ""])
def test_an_ipv6_zone_must_be_an_interface_name(zone: str) -> None:
    with pytest.raises(ConfigError):
        parse_target(f"[fe80::1%{zone}]:22", "--host")


def test_an_ipv6_zone_that_is_an_interface_name_is_fine() -> None:
    assert parse_target("[fe80::1%eth0]:22", "--host").hostname == "fe80::1%eth0"


def test_deeply_nested_toml_gets_one_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("a = " + "[" * 200_000 + "]" * 200_000 + "\n")
    out = subprocess.run(
        [sys.executable, "-m", "gpuci_tui.cli.main", "--config", str(path), "check-config"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert out.returncode == 4
    assert "Traceback" not in out.stderr
    assert "nests arrays or tables thousands of levels deep" in out.stderr
    assert len(out.stderr) < 1000
