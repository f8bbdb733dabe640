"""`run` and `check-config` check `gpus = "per-agent"` against the GPUs NVML sees.

The real binary runs with the project's fake libnvidia-ml.so.1 (built by the
`fake_nvml_lib` fixture) on LD_LIBRARY_PATH, reporting two GPUs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_check_config_counts_host_gpus_for_per_agent(fake_nvml_lib: Path, tmp_path: Path) -> None:
    """`check-config` asks NVML how many GPUs there are: 3 per-agent slots on 2 GPUs fail."""

    from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config, save_config

    path = tmp_path / "config.toml"
    agents = AgentsConfig(count=2, image="acme/agent:1", name_prefix="h", gpus="per-agent")
    save_config(Config(azure=AzureConfig("https://dev.azure.com/acme", "gpu"), agents=agents), path)
    state = tmp_path / "nvml-state"
    state.write_text(
        "driver 580.82.07\ncuda 13000\ncuda_v2 13000\n"
        "gpu NVIDIA_L4 GPU-1 0 0 0 23034 34 16000 72000 0\n"
        "gpu NVIDIA_L4 GPU-2 0 0 0 23034 34 16000 72000 0\n"
    )
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_nvml_lib.parent), FAKE_NVML_STATE=str(state))

    def check() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gpuci_tui.cli.main", "--config", str(path), "check-config"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    ok = check()
    assert ok.returncode == 0, ok.stderr
    path.write_text(path.read_text().replace("count = 2", "count = 3"))
    bad = check()
    assert bad.returncode == 4
    assert "agents.count" in bad.stderr
    assert "but this host has 2 GPUs" in bad.stderr
    assert "Traceback" not in bad.stderr
