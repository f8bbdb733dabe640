"""``gpuci-tui agents prune``: the dry run's listing, confirmation (tty, --yes, no stdin), the daemon path."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.cli import exitcodes
from gpuci_tui.cli.agents_cmd import NO_CONFIRMATION, run_agents
from gpuci_tui.cli.common import socket_for
from gpuci_tui.cli.main import build_parser, main
from gpuci_tui.core.config.loader import (
    AgentsConfig,
    AzureConfig,
    Config,
    load_config,
    save_config,
)
from gpuci_tui.core.docker.agentspec import host_marker
from gpuci_tui.core.engine.stale import MARKER_HOST, MARKER_INSTANCE
from gpuci_tui.core.host.observers.stale_watch import own_instances
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.org import SimOrg
from tests.core.supervisor_env import PAT


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    save_config(
        Config(
            azure=AzureConfig(url="http://127.0.0.1:9", pool="gpu"),
            agents=AgentsConfig(count=2, image="acme/agent:1", name_prefix="box", gpus="none"),
        ),
        path,
    )
    return path


@pytest.fixture
def org(config_file: Path) -> SimOrg:
    """Our leftover ``box-7``, a current lane ``box-1`` (offline), another host's ``far-0``."""
    org = SimOrg(heartbeat_timeout=600.0)
    org.add_pat(PAT)
    org.add_pool("gpu")
    (ours,) = own_instances(load_config(config_file), "gpu")
    for name, host in (("box-7", host_marker()), ("box-1", host_marker()), ("far-0", "far")):
        caps = {MARKER_INSTANCE: ours, MARKER_HOST: host}
        org.register("gpu", name, PAT, name, capabilities=caps, open_session=False)
    return org


def names(org: SimOrg) -> set[str]:
    return {a.name for a in org.agents(org.pools()[0].id)}


def prune(config_file: Path, org: SimOrg, *flags: str, **kwargs: Any) -> int:
    args = build_parser().parse_args(["--config", str(config_file), "agents", "prune", *flags])
    return run_agents(args, api=SimPoolApi(org, PAT), **kwargs)


def test_dry_run_lists_and_removes_nothing(
    config_file: Path, org: SimOrg, capsys: pytest.CaptureFixture[str]
) -> None:
    assert prune(config_file, org, "--dry-run") == exitcodes.OK
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "1 stale registration would be removed:"
    assert out[1].startswith("box-7  id ") and "offline 0s (since " in out[1]
    assert out[1].endswith("registered by this instance; no lane uses the name any more")
    assert len(out) == 2 and names(org) == {"box-7", "box-1", "far-0"}


def test_without_a_terminal_or_yes_nothing_is_removed(
    config_file: Path, org: SimOrg, capsys: pytest.CaptureFixture[str]
) -> None:
    code = prune(config_file, org, interactive=lambda: False)
    assert code == exitcodes.USAGE
    assert capsys.readouterr().err.strip() == f"gpuci-tui: {NO_CONFIRMATION}"
    assert "box-7" in names(org)


def test_yes_removes_with_an_event_and_a_summary(
    config_file: Path, org: SimOrg, capsys: pytest.CaptureFixture[str]
) -> None:
    assert prune(config_file, org, "--yes", interactive=lambda: False) == exitcodes.OK
    out = capsys.readouterr().out.splitlines()
    assert out[-2].startswith("removed stale registration box-7 (id ")
    assert out[-1] == "removed 1 stale registration"
    assert names(org) == {"box-1", "far-0"}


@pytest.mark.parametrize(
    ("answer", "left"), [("n", {"box-7", "box-1", "far-0"}), ("y", {"box-1", "far-0"})]
)
def test_a_terminal_is_asked(
    config_file: Path, org: SimOrg, answer: str, left: set[str], capsys: pytest.CaptureFixture[str]
) -> None:
    asked: list[str] = []

    def ask(question: str) -> str:
        asked.append(question)
        return answer

    assert prune(config_file, org, ask=ask, interactive=lambda: True) == exitcodes.OK
    assert asked == ["Remove this registration? [y/N] "]
    assert names(org) == left


def test_nothing_stale_says_so(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    org = SimOrg()
    org.add_pat(PAT)
    org.add_pool("gpu")
    assert prune(config_file, org, interactive=lambda: False) == exitcodes.OK
    assert capsys.readouterr().out == "no stale registrations\n"


class FakeDaemon:
    """Answers hello and commands on the configuration's control socket; records commands."""

    def __init__(self, path: Path) -> None:
        self.commands: list[dict[str, Any]] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                request = json.loads(conn.makefile("rb").readline())
                reply: dict[str, Any] = {"ok": True, "protocol": 1, "pid": 7, "instance": "i"}
                if request["op"] == "command":
                    command = request["command"]
                    self.commands.append(command)
                    message = "1 stale registration would be removed:\nbox-7  id 5  ..."
                    if not command["dry_run"]:
                        message = "removed 1 stale registration"
                    reply = {
                        "ok": True,
                        "result": {"ok": True, "message": message, "affected": [5]},
                    }
                conn.sendall(json.dumps(reply).encode() + b"\n")


@pytest.fixture
def daemon(config_file: Path) -> Iterator[FakeDaemon]:
    fake = FakeDaemon(socket_for(load_config(config_file)))
    yield fake
    fake.server.close()


def test_with_a_daemon_it_goes_through_the_socket(
    config_file: Path, daemon: FakeDaemon, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--config", str(config_file), "agents", "prune", "--yes"]) == exitcodes.OK
    assert daemon.commands == [
        {"type": "prune", "dry_run": True, "agent_ids": None},
        {"type": "prune", "dry_run": False, "agent_ids": [5]},  # only what was listed
    ]
    assert capsys.readouterr().out.splitlines()[-1] == "removed 1 stale registration"


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["agents", "prune", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "--dry-run" in out and "--yes" in out


def test_status_counts_the_stale_registrations() -> None:
    from dataclasses import replace

    from gpuci_tui.cli.render import render_status
    from gpuci_tui.core.registrations import StaleRegistration
    from tests.ui.scenarios import loaded_snapshot

    snap = loaded_snapshot()
    assert "stale" not in render_status(snap)
    stale = StaleRegistration(7, "old-0", "offline", None, "an earlier name prefix")
    text = render_status(replace(snap, stale=(stale,)))
    assert "stale registrations: 1 (gpuci-tui agents prune --dry-run lists them)" in text
