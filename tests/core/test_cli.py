"""The command line: help everywhere, exit codes scripts can rely on, plain messages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuci_tui.cli import exitcodes
from gpuci_tui.cli.main import build_parser, main
from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config, save_config

COMMANDS = [
    "setup",
    "run",
    "status",
    "drain",
    "resume",
    "restart",
    "scale",
    "pause",
    "unpause",
    "stop",
    "reload",
    "demo",
    "token",
    "check-config",
]


def write_config(path: Path) -> Path:
    save_config(
        Config(
            azure=AzureConfig(url="https://dev.azure.com/acme", pool="gpu"),
            agents=AgentsConfig(count=2, image="acme/agent:1", name_prefix="host", gpus="none"),
        ),
        path,
    )
    return path


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    assert "usage: gpuci-tui" in capsys.readouterr().out


def test_top_level_help_lists_commands_and_exit_codes() -> None:
    text = build_parser().format_help()
    for command in ("run", "status", "drain", "demo"):
        assert command in text
    assert "3 no daemon" in text


def test_status_without_daemon_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path / "config.toml")
    code = main(["--config", str(config), "status"])
    assert code == exitcodes.NO_DAEMON
    err = capsys.readouterr().err
    assert "no gpuci-tui daemon is running" in err
    assert "gpuci-tui run" in err


def test_missing_config_exits_4_and_says_how(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--config", str(tmp_path / "absent.toml"), "status"])
    assert code == exitcodes.CONFIG
    assert "gpuci-tui setup" in capsys.readouterr().err


def test_broken_config_exits_4_and_names_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "config.toml")
    config.write_text(config.read_text().replace("count = 2", 'count = "two"'))
    assert main(["--config", str(config), "check-config"]) == exitcodes.CONFIG
    err = capsys.readouterr().err
    assert "agents.count" in err
    assert '"two"' in err


def test_check_config_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path / "config.toml")
    assert main(["--config", str(config), "check-config"]) == exitcodes.OK
    out = capsys.readouterr().out
    assert "OK (2 slots, pool 'gpu')" in out
    assert "GPU admission: none (no GPU)" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["drain"], "which slots?"),
        (["drain", "1", "--all"], "not both"),
        (["restart"], "which slots?"),
    ],
)
def test_slot_arguments_are_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    config = write_config(tmp_path / "config.toml")
    assert main(["--config", str(config), *args]) == exitcodes.USAGE
    assert message in capsys.readouterr().err


def test_bad_argument_type_is_usage_error() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["scale", "two"])
    assert exc.value.code == exitcodes.USAGE


def test_console_refuses_without_a_terminal(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml")
    out = subprocess.run(
        [sys.executable, "-m", "gpuci_tui.cli.main", "--config", str(config)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert out.returncode == exitcodes.USAGE
    assert "needs a terminal" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_closed_stdout_ends_quietly_with_141(tmp_path: Path) -> None:
    """``gpuci-tui status --json | head``: the reader goes away; no BrokenPipeError traceback."""
    import os

    config = write_config(tmp_path / "config.toml")
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: every write is EPIPE
    try:
        out = subprocess.run(
            [sys.executable, "-m", "gpuci_tui.cli.main", "--config", str(config), "check-config"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert out.returncode == exitcodes.OUTPUT_CLOSED, out.stderr
    assert out.stderr == ""
