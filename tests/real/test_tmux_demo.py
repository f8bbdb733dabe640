"""The real `gpuci-tui demo` binary in a real terminal (tmux, private socket): keys and screens."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from tests.waiting import wait_until

pytestmark = pytest.mark.tmux

BINARY = Path(sys.executable).parent / "gpuci-tui"


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


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is required (scripts/test.sh installs it)", pytrace=False)
    assert BINARY.exists(), f"console script missing: {BINARY}"
    marker = tmp_path / "exit-code"
    command = (
        f"TERM=screen-256color {BINARY} demo --agents 2 --jobs-per-minute 40; "
        f"echo $? > {marker}; sleep 5"
    )
    tmux = Tmux(command)
    tmux.marker = marker  # type: ignore[attr-defined]
    try:
        yield tmux
    finally:
        tmux.kill()


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
    demo.keys("q")
    demo.wait(lambda s: "Leave running" in s or "leave" in s.lower(), what="quit dialog")
    demo.keys("l")
    marker: Path = demo.marker  # type: ignore[attr-defined]
    wait_until(marker.exists, 15, lambda: f"the demo to exit; screen:\n{demo.screen()}")
    assert marker.read_text().strip() == "0"


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
        wait_until(marker.exists, 30, lambda: f"the demo to exit; screen:\n{tmux.screen()}")
        assert marker.read_text().strip() == "0"
        assert demo_containers() == [], "the demo must remove every container it made"
    finally:
        tmux.kill()
