"""Shared fixtures: a real Docker engine, a locally built busybox image, isolation.

Real components are required, not optional: a test that needs Docker, a keyring
or tmux fails with an explanation when the component is missing (the README's
test command, scripts/test.sh, installs and starts all of them).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import fixture_images

# The tiers' hooks: component markers, --quick, the unmarked-component guard, serial tests.
from tests.tiers import *  # noqa: F403 - pytest finds hooks by name in a conftest


@pytest.fixture(autouse=True)
def _isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keep every test away from the developer's own config, state and keyring."""
    home = tmp_path_factory.mktemp("home")
    for var, sub in (
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_STATE_HOME", "state"),
        ("XDG_DATA_HOME", "data"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_RUNTIME_DIR", "run"),
    ):
        path = home / sub
        path.mkdir(mode=0o700)
        monkeypatch.setenv(var, str(path))
    for var in (
        "GPUCI_CONFIG",
        "GPUCI_PAT",
        "GPUCI_PAT_FILE",
        "PYTHON_KEYRING_BACKEND",
        "CREDENTIALS_DIRECTORY",
    ):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(autouse=True)
def _simulated_agents_end(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every simulated agent a test started ends with the test.

    A supervisor leaves its agents running when it stops (a restarted daemon adopts
    them), so the agents of a test's `SimulatedRuntime` (threads that long-poll their
    organisation) outlived it: at the end of a full run some 170 of them were still
    waking every poll, and the last tests' event loops ran late for it.
    """
    from gpuci_tui.sim.runtime import SimulatedRuntime

    created: list[SimulatedRuntime] = []
    init = SimulatedRuntime.__init__

    def recording_init(self: SimulatedRuntime, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        created.append(self)

    monkeypatch.setattr(SimulatedRuntime, "__init__", recording_init)
    yield
    for runtime in created:
        runtime.close()


def _require(ok: bool, what: str) -> None:
    if not ok:
        pytest.fail(
            f"{what} is required for this test and is missing. "
            "Run scripts/test.sh, which installs and starts it.",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def docker_client() -> Iterator[object]:
    """A docker-py client for the local engine (fails when there is none)."""
    import docker

    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine"
        _require(False, f"A Docker engine ({exc.__class__.__name__}: {exc})")
        raise
    yield client
    client.close()


@pytest.fixture(scope="session")
def busybox_image(docker_client: object) -> str:
    """A busybox image imported locally (no registry is reachable)."""
    return fixture_images.busybox_image(docker_client)


@pytest.fixture(scope="session")
def emulator_image(docker_client: object) -> str:
    """The busybox Azure Pipelines agent emulator image (built locally, never pulled)."""
    return fixture_images.emulator_image(docker_client)


@pytest.fixture(scope="session")
def broken_image(docker_client: object, busybox_image: str) -> str:
    """An image whose container exits 1 at once (a crash-looping agent)."""
    return fixture_images.derived_image(
        docker_client,
        busybox_image,
        "gpuci-fixture/broken:1",
        ['ENTRYPOINT ["sh", "-c", "echo broken agent image >&2; exit 1"]'],
        command=["true"],
    )


@pytest.fixture
def run_label(docker_client: object) -> Iterator[str]:
    """A unique label value; every container carrying it is removed afterwards."""
    value = uuid.uuid4().hex[:12]
    yield value
    client = docker_client
    for c in client.containers.list(  # type: ignore[attr-defined]
        all=True, sparse=True, filters={"label": f"gpuci.test={value}"}
    ):
        with contextlib.suppress(Exception):  # already gone
            c.remove(force=True)


@pytest.fixture
def tmp_config_dir(tmp_path: Path) -> Path:
    """A directory for a test's config file."""
    path = tmp_path / "cfg"
    path.mkdir()
    return path
