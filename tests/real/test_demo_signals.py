"""The real ``gpuci-tui demo`` ends on SIGINT, SIGTERM and SIGHUP and leaves nothing behind.

Each demo runs on a terminal of its own (a pty, `demo_rig`) with its own TMPDIR:
after the signal it must exit with 128 + the signal, and its TMPDIR must be
empty again (its instance folder, the simulated tenant's certificates, ...);
with ``--docker`` also its containers, its registry process and the tag it made
must be gone. SIGHUP comes from the kernel, by closing the demo's terminal, as
when an SSH session drops. A console and the wizard of another terminal, given
the demo's configuration file, work on the running demo too (tmux).
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.real.demo_rig import BINARY, DemoProcess, cli, demo_environment, leftovers
from tests.real.rig import wait_for
from tests.real.test_tmux_demo import Tmux

QUICK = ("--agents", "1", "--agent-startup", "0,0")


def started(tmp_path: Path, *args: str) -> tuple[DemoProcess, Path, Path, dict[str, str]]:
    """A demo (console on a pty unless ``--no-console``) whose daemon answers, and its folder."""
    tmp = tmp_path / "tmp"
    env = demo_environment(tmp, tmp_path / "home")
    demo = DemoProcess(*args, environment=env)
    folder = demo.folder()
    if "--no-console" not in args:
        wait_for(lambda: "Pull image" in demo.output, 60, "the console's dashboard")
    return demo, folder, tmp, env


@pytest.mark.parametrize(
    ("sig", "args"),
    [
        (signal.SIGINT, ()),
        (signal.SIGTERM, ()),
        (signal.SIGHUP, ()),
        (signal.SIGTERM, ("--no-console",)),
        (signal.SIGINT, ("--no-console", "--auth", "service-principal")),
    ],
    ids=["int-console", "term-console", "hup-terminal-closed", "term-no-console", "int-sp"],
)
def test_a_signal_ends_the_demo_and_it_leaves_nothing_behind(
    tmp_path: Path, sig: int, args: tuple[str, ...]
) -> None:
    demo, folder, tmp, env = started(tmp_path, *args, *QUICK)
    try:
        assert cli(folder / "config.toml", "status", environment=env).returncode == 0
        if sig == signal.SIGHUP:
            demo.hang_up()
        else:
            demo.send(sig)
        assert demo.wait(60) == 128 + sig, demo.output
        assert leftovers(tmp) == [], f"left in TMPDIR after {signal.Signals(sig).name}"
        if sig != signal.SIGHUP:  # a closed terminal shows nothing any more
            assert f"ended; removed {folder}" in demo.output
    finally:
        demo.kill()


@pytest.mark.docker
def test_the_docker_demo_removes_its_containers_registry_and_tag_on_sigterm(
    tmp_path: Path, docker_client: Any
) -> None:
    demo, folder, tmp, env = started(tmp_path, "--docker", "--no-console", *QUICK)
    try:
        config = (folder / "config.toml").read_text()
        image = next(line.split('"')[1] for line in config.splitlines() if "image" in line)
        assert image.startswith("127.0.0.1:"), "never a public registry"
        registry = subprocess.run(
            ["pgrep", "-f", f"docker-registry serve {folder}"], capture_output=True, text=True
        ).stdout.split()
        assert registry, "the demo runs its own registry"
        pulled = cli(folder / "config.toml", "image", "pull", environment=env)
        assert pulled.returncode == 0, pulled.stderr
        assert f"pulled {image}" in pulled.stdout
        labelled = {"label": "io.gpuci-tui.demo=1"}

        def demo_containers() -> list[Any]:
            found = docker_client.containers.list(all=True, sparse=True, filters=labelled)
            return [c for c in found if c.attrs.get("Labels", {}).get("io.gpuci-tui.demo")]

        wait_for(demo_containers, 60, "the demo's containers")
        demo.send(signal.SIGTERM)
        assert demo.wait(90) == 128 + signal.SIGTERM, demo.output
        assert leftovers(tmp) == []
        assert all(
            subprocess.run(["kill", "-0", pid], capture_output=True).returncode != 0
            for pid in registry
        ), "the registry process is gone"
        names = [
            name
            for i in docker_client.images.list()
            for name in (i.attrs.get("RepoTags") or []) + (i.attrs.get("RepoDigests") or [])
        ]
        assert not [n for n in names if n.startswith(image.split("/")[0] + "/")]
        assert demo_containers() == []
    finally:
        demo.kill()


@pytest.mark.tmux
def test_a_console_and_the_wizard_of_another_terminal_work_on_the_demo(tmp_path: Path) -> None:
    demo, folder, tmp, env = started(tmp_path, "--no-console", "--agents", "2")
    config = folder / "config.toml"
    variables = " ".join(f"{k}={v}" for k, v in env.items() if k in ("TMPDIR", "HOME"))
    console = Tmux(f"env {variables} TERM=xterm-256color {BINARY} --config {config}; sleep 5")
    try:
        console.wait(lambda s: "demo-gpu-0" in s and "demo-gpu-1" in s, 60, "the demo's agents")
        console.keys("q")
        console.wait(lambda s: "Leave agents running" in s, 20, "the quit dialog")
        console.keys("l")
        console.wait(lambda s: "gpuci-tui" not in s or "Leave" not in s, 20, "the console gone")
        wizard = Tmux(f"env {variables} TERM=xterm-256color {BINARY} --config {config} setup")
        try:
            # It writes the demo's file, and starts from what the file says.
            wizard.wait(
                # The path may wrap at 80 columns: look for it in the lines joined.
                lambda s: (
                    "Step 1 of 7" in s
                    and folder.name in "".join(line.strip() for line in s.splitlines())
                    and "http://127.0.0.1:" in s
                ),
                30,
                "the wizard on the demo's file",
            )
        finally:
            wizard.kill()
        assert demo.poll() is None, "quitting another console leaves the demo running"
        assert cli(config, "stop", environment=env).returncode == 0
        assert demo.wait(60) == 0
        assert leftovers(tmp) == []
    finally:
        console.kill()
        demo.kill()
