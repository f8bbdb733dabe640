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

# `run` checks the engine before it finds the demo running, and is a daemon's start.
pytestmark = [pytest.mark.docker, pytest.mark.daemon]


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


def the_plan(pat: str, out: Path) -> dict[tuple[str, ...], list[Try]]:
    """What is tried of each command on the demo (``pat``: the demo's, to set it again)."""
    return {
        ("status",): [tried("status", says="2 slots"), tried("status", "--json")],
        ("history",): [tried("history", says="PIPELINE"), tried("history", "--json")],
        ("check-config",): [tried("check-config", says="OK"), tried("check-config", "--live")],
        ("token", "check"): [tried("token", "check", says="PAT from the keyring: The PAT works")],
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


#: The commands tried on one shared demo, in groups that leave it as they found it (so
#: they can run in any order, on any worker), each group in its order. ``stop`` ends a
#: demo: it has a demo of its own (`test_stop_ends_the_demo_leaving_nothing`).
GROUPS: dict[str, tuple[tuple[str, ...], ...]] = {
    "status": (("status",), ("history",), ("check-config",)),
    "reading": (
        ("gpu", "capabilities"),
        ("image", "pull"),
        ("export", "kubernetes"),
        ("bridge",),
        ("run",),
    ),
    "token": (("token", "check"), ("token", "set"), ("token", "delete")),
    # Prune before the lanes' commands: a lane scaled away leaves a stale registration.
    "pool-and-lanes": (
        ("reload",),
        ("agents", "prune"),
        ("gpu", "clear"),
        ("drain",),
        ("resume",),
        ("restart",),
        ("scale",),
        ("pause",),
        ("unpause",),
    ),
}


def test_every_command_is_tried_on_the_demo_or_said_where(tmp_path: Path) -> None:
    plan = the_plan("pat", tmp_path)
    commands = set(walk(build_parser())) - set(ELSEWHERE)
    assert commands == set(plan), "every command is tried on the demo (or said where)"
    grouped = [words for group in GROUPS.values() for words in group]
    assert sorted(grouped) == sorted(set(plan) - {("stop",)}), "each command in one group"


@dataclass(frozen=True)
class SharedDemo:
    """The module's demo: its instance folder, configuration, environment and PAT."""

    demo: DemoProcess
    folder: Path
    tmp: Path
    environment: dict[str, str]
    pat: str

    @property
    def config(self) -> Path:
        """Its configuration file, which another shell passes with --config."""
        return self.folder / "config.toml"


@pytest.fixture(scope="module")
def shared_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedDemo]:
    """One demo for the module's tests of commands that leave it running (it starts in
    seconds, like the real agent: once, not once a test)."""
    base = tmp_path_factory.mktemp("demo-cli")
    tmp = base / "tmp"
    env = demo_environment(tmp, base / "home")
    demo = DemoProcess("--no-console", "--agents", "2", "--agent-startup", "1,1", environment=env)
    try:
        folder = demo.folder()
        secrets = json.loads((folder / "data/gpuci-tui/demo-keyring.json").read_text())
        yield SharedDemo(demo, folder, tmp, env, next(iter(secrets["gpuci-tui"].values())))
        cli(folder / "config.toml", "stop", environment=env)
        demo.wait(60)
    finally:
        demo.kill()


def test_the_demo_says_how_another_shell_reaches_it(shared_demo: SharedDemo) -> None:
    assert shared_demo.folder.parent == shared_demo.tmp
    assert f"gpuci-tui --config {shared_demo.config} status" in shared_demo.demo.output
    assert f"export GPUCI_CONFIG={shared_demo.config}" in shared_demo.demo.output


@pytest.mark.parametrize("group", list(GROUPS))
def test_each_command_works_on_the_demo(
    shared_demo: SharedDemo, group: str, tmp_path: Path
) -> None:
    plan = the_plan(shared_demo.pat, tmp_path / "k8s")
    for words in GROUPS[group]:
        for attempt in plan[words]:
            done = cli(
                shared_demo.config,
                *attempt.args,
                environment=shared_demo.environment,
                stdin=attempt.stdin,
            )
            said = done.stdout + done.stderr
            assert done.returncode in attempt.codes, f"{attempt.args}: {done.returncode}\n{said}"
            assert "Traceback" not in said, f"{attempt.args}:\n{said}"
            assert attempt.says in said, f"{attempt.args}:\n{said}"
    assert shared_demo.demo.poll() is None, "the demo still runs"


def test_the_exported_configuration_works_like_config(shared_demo: SharedDemo) -> None:
    """The other way the demo prints: `export GPUCI_CONFIG=...` once, then plain commands."""
    for args in (("status",), ("history", "--limit", "1"), ("token", "check")):
        done = cli(shared_demo.config, *args, environment=shared_demo.environment, exported=True)
        assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"


def test_stop_ends_the_demo_leaving_nothing(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    env = demo_environment(tmp, tmp_path / "home")
    demo = DemoProcess("--no-console", "--agents", "1", "--agent-startup", "0,0", environment=env)
    try:
        folder = demo.folder()
        config = folder / "config.toml"
        (stop,) = the_plan("", tmp_path)[("stop",)]
        stopped = cli(config, *stop.args, environment=env, exported=True)
        assert stopped.returncode in stop.codes, stopped.stderr
        assert stop.says in stopped.stdout + stopped.stderr
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
