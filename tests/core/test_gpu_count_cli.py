"""`run` and `check-config` check `gpus = "per-agent"` against the GPUs NVML sees.

The real binary runs with the project's fake libnvidia-ml.so.1 (built by the
`fake_nvml_lib` fixture) on LD_LIBRARY_PATH, reporting two GPUs.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.core.nvml_helpers import cli_on_fake_nvml

pytestmark = pytest.mark.nvml


def test_check_config_counts_host_gpus_for_per_agent(fake_nvml_lib: Path, tmp_path: Path) -> None:
    """`check-config` asks NVML how many GPUs there are: 3 per-agent slots on 2 GPUs fail."""

    path, cli = cli_on_fake_nvml(
        fake_nvml_lib,
        tmp_path,
        "per-agent",
        "driver 580.82.07\ncuda 13000\ncuda_v2 13000\n"
        "gpu NVIDIA_L4 GPU-1 0 0 0 23034 34 16000 72000 0\n"
        "gpu NVIDIA_L4 GPU-2 0 0 0 23034 34 16000 72000 0\n",
    )

    def check() -> subprocess.CompletedProcess[str]:
        return cli("check-config")

    ok = check()
    assert ok.returncode == 0, ok.stderr
    path.write_text(path.read_text().replace("count = 2", "count = 3"))
    bad = check()
    assert bad.returncode == 4
    assert "agents.count" in bad.stderr
    assert "but this host has 2 GPUs" in bad.stderr
    assert "Traceback" not in bad.stderr
