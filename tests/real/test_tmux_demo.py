"""The real `gpuci-tui demo` binary in a real terminal (tmux, private socket): keys and screens."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from gpuci_tui.sim.jobs import PIPELINES
from tests.waiting import wait_until

pytestmark = pytest.mark.tmux

BINARY = Path(sys.executable).parent / "gpuci-tui"
RUN = re.compile(r"\d{8}\.\d+")
"""A run number as the simulated organisation names runs (20261128.4)."""


class Tmux:
    """A tmux server of our own (-L) with one session running a command."""

    def __init__(self, command: str, width: int = 100, height: int = 30) -> None:
        self.socket = f"gpuci-test-{uuid.uuid4().hex[:8]}"
        self._run("new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height), command)

    def _run(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10
        )
        return out.stdout

    def screen(self) -> str:
        return self._run("capture-pane", "-p", "-t", "t")

    def keys(self, *keys: str) -> None:
        self._run("send-keys", "-t", "t", *keys)

    def alive(self) -> bool:
        return (
            subprocess.run(
                ["tmux", "-L", self.socket, "has-session", "-t", "t"],
                capture_output=True,
                timeout=10,
            ).returncode
            == 0
        )

    def wait(self, pred: Callable[[str], bool], timeout: float = 20.0, what: str = "") -> str:
        """Wait until ``pred`` holds for the screen; that screen."""
        last = [""]

        def shown() -> str | None:
            last[0] = self.screen()
            return last[0] if pred(last[0]) else None

        screen = wait_until(shown, timeout, lambda: f"{what}; screen:\n{last[0]}")
        return screen or ""

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10)

    def processes(self) -> list[psutil.Process]:
        """Every process under this tmux server: its session's shell and all it started."""
        pid = self._run("display-message", "-p", "-t", "t", "#{pid}").strip()
        try:
            return psutil.Process(int(pid)).children(recursive=True)
        except (ValueError, psutil.Error):
            return []


def start_demo(
    tmp_path: Path,
    width: int = 100,
    height: int = 30,
    jobs_per_minute: float = 40,
    agent_startup: str = "6,3",
) -> Tmux:
    """The demo with 2 agents (``agent_startup``: its option, the real agent's by default)."""
    if shutil.which("tmux") is None:
        pytest.fail("tmux is required (scripts/test.sh installs it)", pytrace=False)
    assert BINARY.exists(), f"console script missing: {BINARY}"
    marker = tmp_path / "exit-code"
    command = (
        f"TERM=screen-256color {BINARY} demo --agents 2 --jobs-per-minute {jobs_per_minute:g} "
        f"--agent-startup {agent_startup}; echo $? > {marker}; sleep 5"
    )
    tmux = Tmux(command, width, height)
    tmux.marker = marker  # type: ignore[attr-defined]
    return tmux


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Tmux]:
    """The demo with agents that stay idle (a job an hour) and start in 1.5 s: a drain then
    ends at once, where a demo job (8-40 s) under way made the test wait for its end (33 s
    in CI), and the restart's agents are back in seconds. The keys and screens are the
    same; a drain that waits for a job is the engine's (tests/core/engine)."""
    tmux = start_demo(tmp_path, jobs_per_minute=1 / 60, agent_startup="1,0.5")
    try:
        yield tmux
    finally:
        tmux.kill()


def quit_demo(demo: Tmux) -> None:
    """q, then leave: the demo ends and removes what it made (exit 0)."""
    demo.keys("q")
    demo.wait(lambda s: "Leave agents running" in s, what="quit dialog")
    demo.keys("l")
    marker: Path = demo.marker  # type: ignore[attr-defined]
    wait_until(
        lambda: marker.exists() and marker.read_text().strip(),
        15,
        lambda: f"the demo to exit; screen:\n{demo.screen()}",
    )
    assert marker.read_text().strip() == "0"


#: A job in the agents table: its pipeline in quotes, then its run number.
JOB = re.compile(r"'([^']*)' (\S+)")


def busy_jobs(screen: str) -> list[tuple[str, str]]:
    """(pipeline, run) of each busy row of the agents table (the rows between its borders)."""
    rows = screen.split("─ Agents ─", 1)[-1].split("╰", 1)[0].splitlines()
    return [m.groups() for row in rows if " busy " in row and (m := JOB.search(row))]


def test_demo_at_80x24_shows_every_job_whole_and_the_daemons_uptime(tmp_path: Path) -> None:
    """The first size: job names get the table's width before anything else, the header
    keeps the daemon's uptime (issue 27: 'trai…', 'daemon pid 15447 up …')."""
    demo = start_demo(tmp_path, 80, 24)
    try:
        screen = demo.wait(
            lambda s: len(busy_jobs(s)) == 2, timeout=90, what="both agents busy with a job"
        )
        for pipeline, run in busy_jobs(screen):
            assert pipeline in PIPELINES, f"cut job name {pipeline!r}:\n{screen}"
            assert RUN.fullmatch(run), f"cut run number {run!r}:\n{screen}"
        header = screen.splitlines()[1]
        assert re.search(r"demo daemon up \d+[smhd](\d\d[smh])?$", header.rstrip()), header
        quit_demo(demo)
    finally:
        demo.kill()


def test_demo_dashboard_drain_restart_and_quit(demo: Tmux) -> None:
    screen = demo.wait(lambda s: "gpu-demo" in s and "demo-gpu-0" in s, what="the dashboard")
    assert "DEMO" in screen
    demo.wait(lambda s: "idle" in s or "busy" in s, what="agents online")
    demo.keys("D")
    demo.wait(lambda s: "Drain all 2 agents?" in s, what="drain confirmation")
    demo.keys("y")
    demo.wait(
        lambda s: "Drain all 2 agents?" not in s and s.count("drained") >= 2,
        timeout=60,
        what="both agents drained",
    )
    demo.keys("R")
    demo.wait(lambda s: "Restart all 2 agents?" in s, what="restart confirmation")
    demo.keys("y")
    demo.wait(
        lambda s: "Restart all 2 agents?" not in s and "drained" not in s,
        timeout=30,
        what="agents back after restart",
    )
    quit_demo(demo)


@pytest.mark.docker
def test_demo_docker_runs_real_emulator_containers_and_removes_them(
    tmp_path: Path, docker_client: object
) -> None:
    marker = tmp_path / "exit-code"
    tmux = Tmux(
        f"TERM=xterm-256color {BINARY} demo --docker --agents 2 --jobs-per-minute 60; "
        f"echo $? > {marker}; sleep 5"
    )

    def demo_containers() -> list[object]:
        return docker_client.containers.list(  # type: ignore[attr-defined,no-any-return]
            all=True, sparse=True, filters={"label": "io.gpuci-tui.demo=1"}
        )

    try:
        tmux.wait(lambda s: "demo-gpu-1" in s and "busy" in s, timeout=60, what="a busy agent")
        assert len(demo_containers()) >= 2, "the agents must be real containers"
        tmux.keys("q")
        tmux.wait(lambda s: "Leave agents running" in s, what="quit dialog")
        tmux.keys("l")
        wait_until(
            lambda: marker.exists() and marker.read_text().strip(),
            30,
            lambda: f"the demo to exit; screen:\n{tmux.screen()}",
        )
        assert marker.read_text().strip() == "0"
        assert demo_containers() == [], "the demo must remove every container it made"
    finally:
        tmux.kill()
