"""The command line's words: each exit code means one thing, --help is complete, the answer
comes first (log lines only with -v), and an unreadable file with no daemon says so."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuci_tui.cli import exitcodes
from gpuci_tui.cli.main import build_parser, main
from gpuci_tui.core import errors
from gpuci_tui.core.azure.errors import AzurePoolAmbiguousError
from gpuci_tui.core.azure.validate import REASONS
from gpuci_tui.core.config.file import ConfigError
from gpuci_tui.core.config.paths import PathError
from gpuci_tui.core.host.control.client import ControlError
from gpuci_tui.core.host.instance import AlreadyRunningError
from gpuci_tui.core.secrets.entra_secrets import EntraSecretError
from gpuci_tui.core.secrets.token_store import (
    InvalidTokenError,
    KeyringLockedError,
    KeyringUnavailableError,
    TokenFileError,
    TokenMissingError,
)

ERRORS: list[tuple[BaseException, int]] = [
    (errors.AzureUnreachableError("Cannot reach dev.azure.com: name does not resolve"), 8),
    (errors.AzureRateLimitError("TF400733: delayed", retry_after=30.0), 8),
    (errors.AzureServerError("503 after retries"), 8),
    (errors.AzureAuthError("401"), 5),
    (errors.AzureScopeError("403 on pools"), 5),
    (KeyringUnavailableError("no Secret Service"), 5),
    (KeyringLockedError("locked"), 5),
    (TokenMissingError("no PAT stored"), 5),
    (InvalidTokenError("empty"), 5),
    (TokenFileError("unreadable"), 5),
    (EntraSecretError("no client secret"), 5),
    (ConfigError("bad", key="agents.count"), 4),
    (PathError("no runtime directory"), 4),
    (errors.RuntimeUnavailableError("no socket"), 7),
    (AlreadyRunningError("another daemon"), 6),
    (ControlError("no daemon answers"), 3),
    (KeyboardInterrupt(), 130),
    (errors.AzureNotFoundError("no such agent"), 1),
    (AzurePoolAmbiguousError("two pools", pools=()), 1),
    (errors.ImagePullError("manifest unknown"), 1),
    (errors.ContainerStartError("no GPU runtime"), 1),
    (errors.GpuciError("anything else"), 1),
]


@pytest.mark.parametrize(("error", "code"), ERRORS, ids=[type(e).__name__ for e, _ in ERRORS])
def test_each_error_class_has_the_exit_code_of_its_meaning(error: BaseException, code: int) -> None:
    assert exitcodes.for_error(error) == code
    assert code in exitcodes.MEANINGS


CHECKS = {
    "ok": 0,
    "unreachable": 8,  # a DNS or connection failure says nothing about the PAT
    "rate_limited": 8,
    "bad_pat": 5,
    "no_scope": 5,
    "error": 5,
    "pool_not_found": 4,
    "pool_ambiguous": 4,
}


def test_every_sign_in_check_reason_has_its_exit_code() -> None:
    assert set(CHECKS) == set(REASONS)
    assert {reason: exitcodes.for_check(reason) for reason in REASONS} == CHECKS


def test_help_lists_every_exit_code() -> None:
    defined = {
        value
        for name, value in vars(exitcodes).items()
        if name.isupper() and isinstance(value, int) and name != "MEANINGS"
    }
    assert defined == set(exitcodes.MEANINGS)
    text = " ".join(build_parser().format_help().split())
    for code, words in exitcodes.MEANINGS.items():
        assert f"{code} {words}" in text
    assert "141 output closed" in text and "8 Azure DevOps unreachable" in text


def _commands(
    parser: argparse.ArgumentParser, path: str = "gpuci-tui"
) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, f"{path} {name}")
    return found


def test_every_option_of_every_command_has_help_text() -> None:
    missing = [
        f"{path} {'/'.join(action.option_strings) or action.dest}"
        for path, parser in _commands(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction) and not action.help
    ]
    assert missing == []


def write_config(path: Path, url: str = "https://dev.azure.com/acme") -> Path:
    path.write_text(
        f'[azure]\nurl = "{url}"\npool = "gpu"\n\n'
        '[agents]\ncount = 1\nimage = "acme/agent:1"\nname_prefix = "h"\ngpus = "none"\n',
        encoding="utf-8",
    )
    return path


def test_reload_of_an_unreadable_file_without_a_daemon_says_there_is_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--config", str(tmp_path / "absent.toml"), "reload", "--dry-run"])
    err = capsys.readouterr().err
    assert code == exitcodes.CONFIG
    assert "no daemon runs for this configuration file: there is nothing to reload" in err
    assert "the daemon runs" not in err


def cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    pat = tmp_path / "pat"
    pat.write_text("p" * 52 + "\n", encoding="utf-8")
    pat.chmod(0o600)
    env = {**os.environ, "GPUCI_PAT_FILE": str(pat), "XDG_RUNTIME_DIR": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-m", "gpuci_tui.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_an_unreachable_organisation_exits_8_with_the_answer_and_no_log_line(
    tmp_path: Path,
) -> None:
    """Nothing listens on 127.0.0.1:9: unreachable, not "the credentials are wrong" (5)."""
    config = write_config(tmp_path / "config.toml", url="http://127.0.0.1:9/acme")
    out = cli("--config", str(config), "token", "check", tmp_path=tmp_path)
    assert out.returncode == exitcodes.UNREACHABLE, out
    assert out.stdout.startswith(f"PAT from {tmp_path / 'pat'}: Cannot reach 127.0.0.1:9"), (
        out.stdout
    )
    assert out.stderr == "", "the client's log line is not printed without -v"
    verbose = cli("--config", str(config), "token", "check", "-v", tmp_path=tmp_path)
    assert verbose.returncode == exitcodes.UNREACHABLE
    assert "WARNING gpuci_tui.azure" in verbose.stderr, "with -v the log goes to stderr"
