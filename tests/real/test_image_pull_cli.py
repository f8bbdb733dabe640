"""``gpuci-tui image pull`` as a process, against a registry on loopback; its progress forms."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from gpuci_tui.cli import exitcodes
from gpuci_tui.cli.image_cmd import ProgressLine, bar
from gpuci_tui.core.docker.pull_progress import PullProgress
from tests.real.registry import (
    LoopbackRegistry,
    free_port,
    loopback_registry,
    publish,
    remove_repo,
    unique_repo,
)

pytestmark = [pytest.mark.docker, pytest.mark.registry]

MB = 1_000_000


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackRegistry]:
    with loopback_registry(tmp_path_factory.mktemp("registry")) as started:
        yield started


def write_config(path: Path, groups: dict[str, str]) -> Path:
    doc: dict[str, Any] = {
        "azure": {"url": "https://dev.azure.com/acme", "pool": "gpu"},
        "agents": {"count": 1, "image": next(iter(groups.values())), "name_prefix": "pulltest"},
        "groups": {
            name: {"count": 1, "image": image, "name_prefix": f"p{name}", "gpus": "none"}
            for name, image in groups.items()
        },
    }
    path.write_text(tomli_w.dumps(doc))
    return path


def cli(config: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DOCKER_CONFIG": str(home / "docker-config")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuci_tui.cli.main",
            "--config",
            str(config),
            "image",
            "pull",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def test_image_pull_pulls_each_group_s_image_with_plain_progress(
    docker_client: Any, busybox_image: str, registry: LoopbackRegistry, tmp_path: Path
) -> None:
    ref = f"{registry.host}/{unique_repo()}:v1"
    digest = publish(docker_client, busybox_image, ref, 8 * MB)
    missing = f"{registry.host}/{unique_repo()}:v1"
    config = write_config(tmp_path / "config.toml", {"a": ref, "b": missing})
    try:
        done = cli(config, "--group", "a", home=tmp_path)
        assert done.returncode == exitcodes.OK, done.stderr
        lines = done.stdout.splitlines()
        # Not a terminal: plain lines (no carriage returns), the last one says what was pulled.
        assert "\r" not in done.stdout
        assert lines[0].startswith(f"pulling {ref}: ")
        assert lines[-1].startswith(f"pulled {ref} ({digest}) in ")
        assert lines[-1].endswith(" MB downloaded")
        # Both groups: the first is up to date, the second is not in the registry.
        both = cli(config, home=tmp_path)
        assert both.returncode == exitcodes.FAILED
        assert f"pulled {ref} ({digest})" in both.stdout
        assert both.stderr.strip() == (
            f"gpuci-tui: pull of {missing} failed: not found in {registry.host} (check the "
            f"repository and tag); Docker said: manifest for {missing} not found: "
            "manifest unknown: manifest unknown"
        )
    finally:
        remove_repo(docker_client, ref)


def test_image_pull_usage_and_unreachable(tmp_path: Path) -> None:
    host = f"127.0.0.1:{free_port()}"
    config = write_config(tmp_path / "config.toml", {"a": f"{host}/agent:v1"})
    unknown = cli(config, "--group", "zz", home=tmp_path)
    assert (unknown.returncode, unknown.stderr.strip()) == (
        exitcodes.USAGE,
        "gpuci-tui: no agent group 'zz' (groups: a)",
    )
    down = cli(config, home=tmp_path)
    assert down.returncode == exitcodes.FAILED
    assert down.stderr.startswith(
        f"gpuci-tui: pull of {host}/agent:v1 failed: registry {host} unreachable"
    )


def progress(done: int, layers: int = 1) -> PullProgress:
    return PullProgress(
        "r/a:1", layers_done=layers, layers_total=3, bytes_done=done, bytes_total=100 * MB
    )


def test_on_a_terminal_one_line_is_rewritten_with_a_bar() -> None:
    out, now = io.StringIO(), [0.0]
    line = ProgressLine(out, tty=True, clock=lambda: now[0])
    line(progress(25 * MB))
    line(progress(30 * MB))  # within REDRAW_EVERY: not drawn
    now[0] += 1
    line(progress(50 * MB))
    line.end()
    assert out.getvalue() == (
        f"\r\033[K{bar(progress(25 * MB))} pulling r/a:1: 1/3 layers, 25.0 MB of 100.0 MB"
        f"\r\033[K{bar(progress(50 * MB))} pulling r/a:1: 1/3 layers, 50.0 MB of 100.0 MB"
        "\r\033[K"
    )
    assert bar(progress(50 * MB), 10) == "[#####-----]"


def test_without_a_terminal_a_line_per_layer_or_every_few_seconds() -> None:
    out, now = io.StringIO(), [0.0]
    line = ProgressLine(out, tty=False, clock=lambda: now[0])
    line(progress(10 * MB))
    now[0] += 1
    line(progress(20 * MB))  # same layer count, 1 s later: nothing
    line(progress(30 * MB, layers=2))  # a layer finished: a line
    now[0] += 5
    line(progress(40 * MB, layers=2))  # 5 s later: a line
    assert [text.split(": ", 1)[1] for text in out.getvalue().splitlines()] == [
        "1/3 layers, 10.0 MB of 100.0 MB",
        "2/3 layers, 30.0 MB of 100.0 MB",
        "2/3 layers, 40.0 MB of 100.0 MB",
    ]
