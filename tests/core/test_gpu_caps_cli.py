"""`gpuci-tui gpu capabilities` prints what each slot's agents advertise, from NVML.

The real binary runs with the project's fake libnvidia-ml.so.1 on LD_LIBRARY_PATH.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config, save_config


def test_each_slot_shows_its_own_gpu(fake_nvml_lib: Path, tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    agents = AgentsConfig(count=2, image="acme/agent:1", name_prefix="h", gpus="per-agent")
    save_config(Config(azure=AzureConfig("https://dev.azure.com/acme", "gpu"), agents=agents), path)
    state = tmp_path / "nvml-state"
    state.write_text(
        "driver 580.159.04\ncuda 13000\ncuda_v2 13000\n"
        "gpu NVIDIA_H100_80GB_HBM3 GPU-1 0 0 0 81559 34 16000 700000 0\n"
        "gpu NVIDIA_L4 GPU-2 0 0 0 23034 34 16000 72000 0\n"
        "compute 0 9 0\nmig 0 0 0\ncompute 1 8 9\n"
    )
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_nvml_lib.parent), FAKE_NVML_STATE=str(state))

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "gpuci_tui.cli.main", "--config", str(path), "gpu"]
        return subprocess.run(
            [*argv, "capabilities", *extra], env=env, capture_output=True, text=True, timeout=60
        )

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
    path = tmp_path / "config.toml"
    agents = AgentsConfig(count=2, image="acme/agent:1", name_prefix="h", gpus="mig")
    save_config(Config(azure=AzureConfig("https://dev.azure.com/acme", "gpu"), agents=agents), path)
    state = tmp_path / "nvml-state"
    state.write_text(
        "driver 580.159.04\ncuda 13000\ncuda_v2 13000\n"
        "gpu NVIDIA_H100_80GB_HBM3 GPU-1 0 0 0 81559 34 16000 700000 0\n"
        "compute 0 9 0\nmig 0 1 1\n"
        "migdev 0 0 MIG-11111111-2222-5333-8444-555555555555 NVIDIA_H100_80GB_HBM3_MIG_1g.10gb 9856\n"
        "migdev 0 3 MIG-66666666-2222-5333-8444-555555555555 NVIDIA_H100_80GB_HBM3_MIG_3g.40gb 40192\n"
    )
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_nvml_lib.parent), FAKE_NVML_STATE=str(state))
    argv = [sys.executable, "-m", "gpuci_tui.cli.main", "--config", str(path), "gpu"]
    done = subprocess.run(
        [*argv, "capabilities", "--json"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    slots = json.loads(done.stdout)["default"]
    assert (slots["0"]["gpu.mig.profile"], slots["0"]["gpu.memory"]) == ("1g.10gb", "9856")
    assert slots["1"]["gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"
