"""The fleet console's command line: when it opens, and what it says when it cannot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuci_tui.cli.fleet_cmd import fleet_config, fleet_requested
from gpuci_tui.cli.main import build_parser
from gpuci_tui.core.config.loader import save_config
from tests.ui.scenarios import sample_config


def gpuci(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuci_tui.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_a_bad_host_is_a_usage_error_with_the_rule() -> None:
    out = gpuci("--host", "ci@gpu 2")
    assert out.returncode == 2
    assert out.stderr == (
        'gpuci-tui: --host: must not contain spaces; write [user@]host[:port], e.g. "ci@gpu2" or '
        '"ci@gpu2:2222"; got "ci@gpu 2"\n'
    )


def test_host_goes_with_the_console_only() -> None:
    out = gpuci("--host", "ci@gpu2", "status")
    assert out.returncode == 2
    assert "--host opens the fleet console; it does not go with 'status'" in out.stderr


def test_the_console_needs_a_terminal() -> None:
    out = gpuci("--host", "ci@gpu2")
    assert out.returncode == 2
    assert "the console needs a terminal" in out.stderr


def test_a_broken_fleet_section_is_a_configuration_error(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[fleet]\nhosts = ["ci@gpu2", "ci@gpu2:70000"]\n')
    out = gpuci("--config", str(path))
    assert out.returncode == 4
    assert out.stderr == (
        f'gpuci-tui: {path}: fleet.hosts[1]: has an invalid port "70000" (a number from 1 to '
        '65535); got "ci@gpu2:70000"\n'
    )


def test_a_missing_ssh_config_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[fleet]\nhosts = ["ci@gpu2"]\nssh_config = "~/no-such-ssh-config"\n')
    out = gpuci("--config", str(path))
    assert out.returncode == 4
    assert "fleet.ssh_config: ~/no-such-ssh-config is not a file" in out.stderr


@pytest.mark.parametrize(
    ("content", "argv", "expected"),
    [
        ('[fleet]\nhosts = ["ci@gpu2"]\n', [], True),
        ("[fleet]\nhosts = []\n", [], False),
        ("", [], False),
        ('[fleet]\nhosts = ["ci@gpu2"]\n', ["setup"], False),
        ("", ["--host", "gpu3"], True),
        ("not toml [", [], False),  # the ordinary console reports the broken file
    ],
)
def test_when_the_fleet_console_opens(
    tmp_path: Path, content: str, argv: list[str], expected: bool
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(content)
    args = build_parser().parse_args(["--config", str(path), *argv])
    assert fleet_requested(args) is expected


def test_host_replaces_the_configured_hosts_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    config = sample_config()
    save_config(config, path)  # a GPU host's own file may carry [fleet] too
    path.write_text(
        path.read_text()
        + '\n[keys]\ndrain = "ctrl+d"\n[fleet]\nhosts = ["ci@gpu2"]\ncommand = "/opt/g/gpuci-tui"\n'
    )
    args = build_parser().parse_args(["--config", str(path), "--host", "ops@gpu7:2200"])
    fleet, keys, where = fleet_config(args)
    assert [h.target for h in fleet.hosts] == ["ops@gpu7:2200"]
    assert fleet.command == "/opt/g/gpuci-tui"
    assert keys == {"drain": "ctrl+d"}
    assert where == path
