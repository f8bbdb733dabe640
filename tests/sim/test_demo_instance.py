"""The demo's own instance: one folder holding all it makes, reached by its configuration file."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import keyring.errors
import pytest

from gpuci_tui.core.config import paths
from gpuci_tui.core.config.loader import load_config
from gpuci_tui.core.secrets.token_store import TokenStore
from gpuci_tui.demo import build_demo
from gpuci_tui.demo_instance import MARKER, DemoInstance, DemoNotes, adopt, demo_gpus, notes_of
from gpuci_tui.demo_keyring import BACKEND_NAME, DemoKeyring

URL = "http://127.0.0.1:8080/demo-org"


@pytest.fixture
def instance(monkeypatch: pytest.MonkeyPatch) -> Iterator[DemoInstance]:
    made = DemoInstance.create()
    # Whatever the test points at the folder comes back afterwards (conftest restores the
    # XDG directories and PYTHON_KEYRING_BACKEND; this variable is the demo tenant's).
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    yield made
    made.remove()


def test_a_command_given_the_demos_configuration_uses_the_demos_folder(
    instance: DemoInstance,
) -> None:
    notes = DemoNotes(
        pid=4242, pull="nothing to pull here", environment={"REQUESTS_CA_BUNDLE": "ca"}
    )
    instance.publish(notes)
    assert stat.S_IMODE(instance.marker_path.stat().st_mode) == 0o600
    assert adopt(instance.config_path) == notes
    root = instance.root
    assert paths.state_dir() == root / "state" / "gpuci-tui"
    assert paths.runtime_dir() == root / "run" / "gpuci-tui"
    assert paths.data_dir() == root / "data" / "gpuci-tui"
    assert paths.default_config_path() == root / "config" / "gpuci-tui" / "config.toml"
    assert os.environ["PYTHON_KEYRING_BACKEND"] == BACKEND_NAME
    assert os.environ["REQUESTS_CA_BUNDLE"] == "ca"


def test_any_other_configuration_changes_nothing(tmp_path: Path) -> None:
    before = dict(os.environ)
    assert adopt(tmp_path / "config.toml") is None
    assert dict(os.environ) == before


def test_a_marker_that_names_another_folder_or_is_a_link_is_not_adopted(
    instance: DemoInstance, tmp_path: Path
) -> None:
    instance.publish(DemoNotes(pid=1))
    copied = tmp_path / "copied"
    copied.mkdir()
    (copied / MARKER).write_text(instance.marker_path.read_text())
    assert notes_of(copied / "config.toml") is None
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / MARKER).symlink_to(instance.marker_path)
    assert notes_of(linked / "config.toml") is None
    instance.marker_path.write_text("{not json")
    assert notes_of(instance.config_path) is None


def test_commands_read_the_demos_synthetic_gpus_for_its_file(
    instance: DemoInstance, tmp_path: Path
) -> None:
    assert demo_gpus(tmp_path / "config.toml") is None, "any other file: this host's GPUs"
    instance.publish(DemoNotes(pid=1))
    assert demo_gpus(instance.config_path) is None, "a demo without GPUs (--docker)"
    instance.publish(DemoNotes(pid=1, gpus="h100:3"))
    sampler = demo_gpus(instance.config_path)
    assert sampler is not None
    try:
        assert sampler.host_info().gpu_count == 3
        assert {g.name for g in sampler.sample().gpus} == {"NVIDIA H100 80GB HBM3"}
    finally:
        sampler.close()


def test_the_demos_keyring_keeps_its_secrets_in_the_folder(instance: DemoInstance) -> None:
    assert not DemoKeyring.viable, "never keyring's own pick outside a demo instance"
    instance.enter()
    assert DemoKeyring.viable
    store = TokenStore(DemoKeyring())
    store.set_token(URL, "demo-pat-" + "x" * 40)
    assert store.get_token(URL) == "demo-pat-" + "x" * 40
    assert store.source_of_token(URL) == "keyring"
    held = instance.root / "data" / "gpuci-tui" / "demo-keyring.json"
    assert stat.S_IMODE(held.stat().st_mode) == 0o600
    assert json.loads(held.read_text()) == {"gpuci-tui": {URL: "demo-pat-" + "x" * 40}}
    assert store.delete_token(URL) and not store.delete_token(URL)
    with pytest.raises(keyring.errors.PasswordDeleteError):
        DemoKeyring().delete_password("gpuci-tui", URL)


def test_the_demo_writes_its_configuration_and_close_removes_its_whole_folder() -> None:
    env = build_demo(agents=1, jobs_per_minute=0.1, seed=1, startup=(0.0, 0.0))
    try:
        assert env.workdir.name.startswith("gpuci-demo-")
        assert load_config(env.instance.config_path) == env.config
        image = env.config.agents.image
        assert image == f"127.0.0.1:{env.server.port}/gpuci-sim/agent:1", "never docker.io"
        assert "simulated runtime" in env.notes().pull
        assert env.notes().gpus == "h100:1"
        assert env.server.listening
    finally:
        env.close()
    assert not env.workdir.exists()
    assert not env.server.listening
    env.close()  # idempotent
