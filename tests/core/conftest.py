"""Fixtures shared by the core tests."""

from __future__ import annotations

import getpass
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import keyring
import pytest
from keyring.backend import KeyringBackend

from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler
from tests.components import need
from tests.core.nvml_helpers import NvmlState
from tests.core.supervisor_env import Env, make_env


@pytest.fixture
def env() -> Env:
    """The simulated organisation, runtime and configuration of the supervisor tests."""
    return make_env()


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


def build_fake_nvml(out_dir: Path, *defines: str) -> Path:
    """Compile the fake libnvidia-ml.so.1 into ``out_dir`` (``defines``: e.g. FAKE_NVML_OLD_DRIVER)."""
    need("nvml", "it builds the fake libnvidia-ml.so.1")
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is required to build the fake libnvidia-ml.so.1 (apt-get install gcc)")
    out = out_dir / "libnvidia-ml.so.1"
    subprocess.run(
        [
            gcc,
            *(f"-D{name}" for name in defines),
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


@pytest.fixture(scope="session")
def fake_nvml_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fake_nvml(tmp_path_factory.mktemp("fake-nvml"))


@pytest.fixture(scope="session")
def fake_nvml_old_driver_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fake that really lacks per-process utilisation and energy (an older driver).

    It has the same soname, so it can only be used in a fresh interpreter.
    """
    return build_fake_nvml(tmp_path_factory.mktemp("fake-nvml-old"), "FAKE_NVML_OLD_DRIVER")


@pytest.fixture
def nvml_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> NvmlState:
    """An empty state file the fake library reads (write the hardware into it)."""
    s = NvmlState(tmp_path / "nvml-state")
    s.write("")
    monkeypatch.setenv("FAKE_NVML_STATE", str(s.path))
    return s


@pytest.fixture
def make_sampler(
    fake_nvml_lib: Path, nvml_state: NvmlState
) -> Iterator[Callable[..., NvmlSampler]]:
    """Build `NvmlSampler`s on the fake library; all are closed afterwards."""
    made: list[NvmlSampler] = []

    def make(**kwargs: Any) -> NvmlSampler:
        kwargs.setdefault("library_path", fake_nvml_lib)
        sampler = NvmlSampler(**kwargs)
        made.append(sampler)
        return sampler

    yield make
    for sampler in made:
        sampler.close()
