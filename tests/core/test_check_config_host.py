"""``check-config`` refuses what ``run`` refuses on this host, each under its own key.

Issue 28: a slot shape the host's GPUs cannot hold (``gpus_per_slot``, MIG) passed
``check-config`` and stopped ``run``. The real binary runs on the project's fake
libnvidia-ml.so.1 (two GPUs); without any NVML a note says what was not checked,
and ``--host`` makes that a failure.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.core.nvml_helpers import cli_on_fake_nvml, run_cli

TWO_GPUS = (
    "driver 580.82.07\ncuda 13000\ncuda_v2 13000\n"
    "gpu NVIDIA_L4 GPU-1 0 0 0 23034 34 16000 72000 0\n"
    "gpu NVIDIA_L4 GPU-2 0 0 0 23034 34 16000 72000 0\n"
    "link 0 1 10\n"
)


@pytest.mark.nvml
@pytest.mark.daemon  # `run` is tried too (it refuses before it starts)
def test_a_mig_shape_without_mig_devices_is_refused_as_run_refuses_it(
    fake_nvml_lib: Path, tmp_path: Path
) -> None:
    path, cli = cli_on_fake_nvml(fake_nvml_lib, tmp_path, "mig", TWO_GPUS)
    checked = cli("check-config")
    assert checked.returncode == 4, checked.stdout
    assert 'agents.gpus: gpus = "mig" needs MIG devices, but no GPU of this host has any' in (
        checked.stderr
    )
    run = cli("run")
    assert run.returncode == 4
    assert 'agents.gpus: gpus = "mig" needs MIG devices' in run.stderr


@pytest.mark.nvml
def test_a_group_of_two_gpu_slots_past_the_hosts_gpus_is_refused(
    fake_nvml_lib: Path, tmp_path: Path
) -> None:
    path, cli = cli_on_fake_nvml(fake_nvml_lib, tmp_path, "none", TWO_GPUS)
    group = '\n[groups.a]\ncount = {}\ngpus = "per-agent"\ngpus_per_slot = 2\n'
    text = path.read_text()
    path.write_text(text + group.format(1))
    fits = cli("check-config")
    assert fits.returncode == 0, fits.stderr
    path.write_text(text + group.format(2))
    bad = cli("check-config")
    assert bad.returncode == 4, bad.stdout
    assert "groups.a.gpus: 2 slots of 2 GPUs need 4 GPUs, but there are 2" in bad.stderr, bad.stderr


def no_nvml(tmp_path: Path, gpus: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """The real binary on a host without any NVIDIA driver."""
    path = tmp_path / "config.toml"
    path.write_text(
        '[azure]\nurl = "https://dev.azure.com/acme"\npool = "gpu"\n\n'
        f'[agents]\ncount = 2\nimage = "acme/agent:1"\nname_prefix = "h"\ngpus = "{gpus}"\n'
    )
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "FAKE_NVML_STATE")}
    return run_cli(path, env, *argv)


def test_without_nvml_a_note_says_what_was_not_checked_and_host_makes_it_fail(
    tmp_path: Path,
) -> None:
    noted = no_nvml(tmp_path, "per-agent", "check-config")
    assert noted.returncode == 0, noted.stderr
    assert "note: this host's GPUs cannot be read" in noted.stderr
    assert "GPU count, slot shapes, GPU ids, CUDA of the images" in noted.stderr
    required = no_nvml(tmp_path, "per-agent", "check-config", "--host")
    assert required.returncode == 1
    assert "this host's GPUs cannot be read" in required.stderr
    # A file that gives no agent a GPU needs no GPU facts.
    none = no_nvml(tmp_path, "none", "check-config", "--host")
    assert none.returncode == 0 and "note" not in none.stderr
