"""Fixtures shared by the core tests."""

from __future__ import annotations

import getpass
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import keyring
import pytest
from keyring.backend import KeyringBackend


@pytest.fixture
def default_keyring() -> Iterator[Callable[[KeyringBackend], None]]:
    """Set keyring's default backend for one test, then restore the previous one."""
    previous = keyring.get_keyring()
    yield keyring.set_keyring
    keyring.set_keyring(previous)


@pytest.fixture
def no_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any terminal prompt fail the test (the file stores call getpass.getpass)."""

    def prompt(*args: object, **kwargs: object) -> str:
        raise AssertionError("the keyring tried to prompt on the terminal")

    monkeypatch.setattr(getpass, "getpass", prompt)


FAKE_NVML_SRC = Path(__file__).resolve().parents[1] / "fixtures" / "fake_nvml.c"


@pytest.fixture(scope="session")
def fake_nvml_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is required to build the fake libnvidia-ml.so.1 (apt-get install gcc)")
    out = tmp_path_factory.mktemp("fake-nvml") / "libnvidia-ml.so.1"
    subprocess.run(
        [
            gcc,
            "-shared",
            "-fPIC",
            "-O2",
            "-Wall",
            "-Werror",
            "-Wl,-soname,libnvidia-ml.so.1",
            "-o",
            str(out),
            str(FAKE_NVML_SRC),
            "-lpthread",
        ],
        check=True,
    )
    return out
