"""`gpuci-tui gpu capabilities` prints what each slot's agents advertise, from NVML.

The real binary runs with the project's fake libnvidia-ml.so.1 on LD_LIBRARY_PATH.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.core.nvml_helpers import cli_on_fake_nvml

pytestmark = pytest.mark.nvml


def test_each_slot_shows_its_own_gpu(fake_nvml_lib: Path, tmp_path: Path) -> None:
    _, cli = cli_on_fake_nvml(
        fake_nvml_lib,
        tmp_path,
        "per-agent",
        "driver 580.159.04\ncuda 13000\ncuda_v2 13000\n"
        "gpu NVIDIA_H100_80GB_HBM3 GPU-1 0 0 0 81559 34 16000 700000 0\n"
        "gpu NVIDIA_L4 GPU-2 0 0 0 23034 34 16000 72000 0\n"
        "compute 0 9 0\nmig 0 0 0\ncompute 1 8 9\n",
    )

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return cli("gpu", "capabilities", *extra)

    text = run()
    assert text.returncode == 0, text.stderr
    assert "default slot 0:\n  gpuci.host = " in text.stdout
    assert "  demand: gpu.product -equals NVIDIA-H100-80GB-HBM3" in text.stdout
    assert "  demand: gpu.product -equals NVIDIA-L4" in text.stdout
    as_json = run("--json")
    assert as_json.returncode == 0, as_json.stderr
    slots = json.loads(as_json.stdout)["default"]
    assert slots["0"]["gpu.family"] == "hopper" and slots["1"]["gpu.family"] == "ada-lovelace"
    assert slots["1"]["mig.capable"] == "false"


def test_mig_slots_show_their_slice(fake_nvml_lib: Path, tmp_path: Path) -> None:
    _, cli = cli_on_fake_nvml(
        fake_nvml_lib,
        tmp_path,
        "mig",
        "driver 580.159.04\ncuda 13000\ncuda_v2 13000\n"
        "gpu NVIDIA_H100_80GB_HBM3 GPU-1 0 0 0 81559 34 16000 700000 0\n"
        "compute 0 9 0\nmig 0 1 1\n"
        "migdev 0 0 MIG-11111111-2222-5333-8444-555555555555 NVIDIA_H100_80GB_HBM3_MIG_1g.10gb 9856\n"
        "migdev 0 3 MIG-66666666-2222-5333-8444-555555555555 NVIDIA_H100_80GB_HBM3_MIG_3g.40gb 40192\n",
    )
    done = cli("gpu", "capabilities", "--json")
    assert done.returncode == 0, done.stderr
    slots = json.loads(done.stdout)["default"]
    assert (slots["0"]["gpu.mig.profile"], slots["0"]["gpu.memory"]) == ("1g.10gb", "9856")
    assert slots["1"]["gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"
