"""Every command of the command line, tried on a real ``gpuci-tui demo --no-console``.

A newcomer's walk: the demo prints how another shell reaches it, and every
command run there with the demo's configuration file works on it (or says
plainly why it does nothing there), then ``gpuci-tui stop`` ends the demo and
nothing it made is left. The commands are read from the parser itself, so a new
command fails this test until it is tried here too.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuci_tui.cli.main import build_parser
from tests.real.demo_rig import DemoProcess, cli, demo_environment, leftovers
from tests.real.rig import wait_for

pytestmark = pytest.mark.docker  # `run` checks the engine before it finds the demo running


@dataclass(frozen=True)
class Try:
    """One command line to try, the exit codes it may give, and what its output must say."""

    args: tuple[str, ...]
    codes: frozenset[int] = frozenset({0})
    says: str = ""
    stdin: str = ""


def tried(*args: str, codes: tuple[int, ...] = (0,), says: str = "", stdin: str = "") -> Try:
    return Try(args, frozenset(codes), says, stdin)


#: Where the commands that own a terminal are tried on the demo instead.
ELSEWHERE = {
    ("demo",): "the command under test",
    ("setup",): "the wizard on the demo's file: tests/real/test_demo_signals.py (tmux)",
    ("console",): "a second console on the demo: tests/real/test_demo_signals.py (tmux)",
}


def walk(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every command (and sub-command, and action of a choice) the parser takes."""
    commands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not commands:
        actions = [a for a in parser._actions if a.choices and not a.option_strings]
        if actions and words:
            yield from (words + (str(choice),) for choice in actions[0].choices or ())
        else:
            yield words
        return
    for name, sub in commands[0].choices.items():
        yield from walk(sub, words + (name,))


def test_the_walk_finds_every_command() -> None:
    found = set(walk(build_parser()))
    assert {("status",), ("token", "check"), ("gpu", "clear"), ("image", "pull")} <= found


def test_every_command_works_on_the_demo_and_stop_ends_it_leaving_nothing(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    env = demo_environment(tmp, tmp_path / "home")
    demo = DemoProcess("--no-console", "--agents", "2", "--agent-startup", "1,1", environment=env)
    try:
        folder = demo.folder()
        assert folder.parent == tmp
        config = folder / "config.toml"
        assert f"gpuci-tui --config {config} status" in demo.output
        assert f"export GPUCI_CONFIG={config}" in demo.output
        secrets = json.loads((folder / "data/gpuci-tui/demo-keyring.json").read_text())
        pat = next(iter(secrets["gpuci-tui"].values()))
        out = tmp_path / "k8s"
        plan = {
            ("status",): [tried("status", says="2 slots"), tried("status", "--json")],
            ("history",): [tried("history", says="PIPELINE"), tried("history", "--json")],
            ("check-config",): [tried("check-config", says="OK"), tried("check-config", "--live")],
            ("token", "check"): [
                tried("token", "check", says="PAT from the keyring: The PAT works")
            ],
            ("token", "set"): [tried("token", "set", "--stdin", stdin=pat + "\n")],
            ("token", "delete"): [
                tried("token", "delete", says="deleted"),
                tried("token", "check", codes=(5,), says="No PAT is stored"),
                tried("token", "set", "--stdin", stdin=pat + "\n"),
            ],
            ("reload",): [tried("reload", "--dry-run", says="no change"), tried("reload")],
            ("agents", "prune"): [
                tried("agents", "prune", "--dry-run", says="2 stale registrations would be"),
                tried("agents", "prune", "--yes", says="removed"),
            ],
            ("image", "pull"): [
                tried("image", "pull", codes=(1,), says="simulated runtime, not in this host's")
            ],
            ("gpu", "clear"): [tried("gpu", "clear", "0", "--yes", says="not quarantined")],
            # The demo's synthetic H100s, whatever GPUs this host has.
            ("gpu", "capabilities"): [tried("gpu", "capabilities", says="NVIDIA-H100-80GB-HBM3")],
            ("drain",): [tried("drain", "0", says="drain")],
            ("resume",): [tried("resume", "0", says="resumed")],
            ("restart",): [tried("restart", "1", says="restart")],
            ("scale",): [tried("scale", "3", says="to 3 slots"), tried("scale", "2")],
            ("pause",): [tried("pause", says="paused")],
            ("unpause",): [tried("unpause", says="resumed")],
            ("export", "kubernetes"): [tried("export", "kubernetes", "--output", str(out))],
            ("bridge",): [tried("bridge", stdin='{"op": "hello"}\n', says='"protocol":1')],
            ("run",): [tried("run", codes=(6,), says="already supervises")],
            ("stop",): [tried("stop", says="stopping")],
        }
        commands = set(walk(build_parser())) - set(ELSEWHERE)
        assert commands == set(plan), "every command is tried on the demo (or said where)"
        for words, attempts in plan.items():
            for attempt in attempts:
                if words == ("stop",):
                    continue  # last: it ends the demo
                done = cli(config, *attempt.args, environment=env, stdin=attempt.stdin)
                said = done.stdout + done.stderr
                assert done.returncode in attempt.codes, (
                    f"{attempt.args}: {done.returncode}\n{said}"
                )
                assert "Traceback" not in said, f"{attempt.args}:\n{said}"
                assert attempt.says in said, f"{attempt.args}:\n{said}"
        # The other way the demo prints: `export GPUCI_CONFIG=...` once, then plain commands.
        for args in (("status",), ("history", "--limit", "1"), ("token", "check")):
            done = cli(config, *args, environment=env, exported=True)
            assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
        stopped = cli(config, "stop", environment=env, exported=True)
        assert stopped.returncode == 0, stopped.stderr
        assert demo.wait(60) == 0, demo.output
        assert f"removed {folder}" in demo.output
        assert leftovers(tmp) == [], "the demo removed everything it made"
        assert not folder.exists()
        # The folder gone, its configuration names nothing: not a demo any more.
        gone = cli(config, "status", environment=env)
        assert gone.returncode == 4 and "no configuration file" in gone.stderr
    finally:
        demo.kill()


def test_a_second_demo_is_a_second_instance(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    env = demo_environment(tmp, tmp_path / "home")
    first = DemoProcess("--no-console", "--agents", "1", "--agent-startup", "0,0", environment=env)
    second = DemoProcess("--no-console", "--agents", "1", "--agent-startup", "0,0", environment=env)
    try:
        one, two = first.folder(), second.folder()
        assert one != two
        for folder in (one, two):
            done = cli(folder / "config.toml", "status", "--json", environment=env)
            assert done.returncode == 0, done.stderr
        pids = {
            json.loads(cli(f / "config.toml", "status", "--json", environment=env).stdout)["pid"]
            for f in (one, two)
        }
        assert pids == {first.pid, second.pid}, "each file reaches its own demo"
        for folder in (one, two):
            assert cli(folder / "config.toml", "stop", environment=env).returncode == 0
        assert (first.wait(60), second.wait(60)) == (0, 0)
        wait_for(lambda: leftovers(tmp) == [], 10, "both folders removed")
    finally:
        first.kill()
        second.kill()
