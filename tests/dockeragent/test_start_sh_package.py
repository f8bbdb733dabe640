"""dockeragent/start.sh prefers a newer agent package the supervisor mounted read-only.

Issue 20: when the organisation requires a newer agent than the image bakes, the
supervisor caches the verified package and mounts it; start.sh copies it into the
agent directory it already uses (per version) so the agent need not update itself.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.dockeragent.start_sh_harness import BAKED_VERSION, Agent

NEWER = "4.280.0"


def mounted_package(agent: Agent, version: str) -> Path:
    """A package tree like the cache's: the agent's files and its version file, read-only."""
    package = agent.root / "agent-package"
    shutil.copytree(agent.dir, package, symlinks=True)
    (package / ".image-agent-version").write_text(version + "\n")
    (package / "bin" / "package-only").write_text(version)
    for base, _dirs, files in os.walk(package):
        for name in files:
            path = Path(base, name)
            path.chmod(0o555 if os.access(path, os.X_OK) else 0o444)
        Path(base).chmod(0o555)
    return package


def test_a_newer_mounted_package_replaces_the_baked_agent(agent: Agent) -> None:
    package = mounted_package(agent, NEWER)
    (agent.dir / "bin" / "baked-only").write_text(BAKED_VERSION)
    result = agent.run(AZP_AGENT_PACKAGE_DIR=str(package))
    assert result.code == 0, result.out
    assert f"using agent {NEWER} from the package mounted at {package}" in result.out
    assert f"installing agent {NEWER} from {package} into {agent.dir}" in result.out
    # The agent ran from its usual (writable) directory, now holding the package's agent.
    assert agent.read("configure.cwd").strip() == str(agent.dir)
    assert (agent.dir / ".image-agent-version").read_text().strip() == NEWER
    assert (agent.dir / "bin" / "package-only").exists()
    assert not (agent.dir / "bin" / "baked-only").exists(), "two versions' binaries mixed"
    assert "AZP_AGENT_PACKAGE_DIR" not in agent.environ("run")
    # The mount itself is left as it was.
    assert (package / ".image-agent-version").read_text().strip() == NEWER


def test_on_a_host_mounted_agent_dir_the_package_is_copied_once_per_version(agent: Agent) -> None:
    package = mounted_package(agent, NEWER)
    target = agent.root / "host-mount" / "gpu-host-1"
    first = agent.run(AZP_AGENT_DIR=str(target), AZP_AGENT_PACKAGE_DIR=str(package))
    assert first.code == 0, first.out
    assert f"installing agent {NEWER}" in first.out
    agent.deliver_token()
    again = agent.run(AZP_AGENT_DIR=str(target), AZP_AGENT_PACKAGE_DIR=str(package))
    assert again.code == 0, again.out
    assert "installing agent" not in again.out
    assert (target / ".image-agent-version").read_text().strip() == NEWER


def test_an_older_or_equal_package_is_ignored(agent: Agent) -> None:
    for version in (BAKED_VERSION, "4.270.9"):
        shutil.rmtree(agent.root / "agent-package", ignore_errors=True)
        package = mounted_package(agent, version)
        agent.deliver_token()
        result = agent.run(AZP_AGENT_PACKAGE_DIR=str(package))
        assert result.code == 0, result.out
        assert f"is not newer than the image's {BAKED_VERSION}; using the image's" in result.out
        assert "installing agent" not in result.out
        assert (agent.dir / ".image-agent-version").read_text().strip() == BAKED_VERSION


def test_no_package_says_nothing_and_an_incomplete_one_is_not_used(agent: Agent) -> None:
    result = agent.run(AZP_AGENT_PACKAGE_DIR=str(agent.root / "nothing-mounted"))
    assert result.code == 0, result.out
    assert "package" not in result.out
    broken = agent.root / "broken-package"
    broken.mkdir()
    (broken / ".image-agent-version").write_text(NEWER + "\n")  # but no config.sh/run.sh
    agent.deliver_token()
    result = agent.run(AZP_AGENT_PACKAGE_DIR=str(broken))
    assert result.code == 0 and "using agent" not in result.out, result.out
