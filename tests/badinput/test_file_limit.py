"""``gpuci-tui run`` raises its soft limit on open files to the hard limit at start."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path


def test_run_lifts_the_soft_file_limit_and_logs_the_figures(tmp_path: Path) -> None:
    def low_soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 4096))

    # No configuration: the daemon stops right after raising the limit, which it logs first.
    result = subprocess.run(
        [sys.executable, "-m", "gpuci_tui.cli.main", "--config", str(tmp_path / "none.toml")]
        + ["run", "--log-level", "INFO"],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=low_soft_limit,  # noqa: PLW1509 - a plain setrlimit, no threads here
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode != 0
    assert "open files limit: 4096 (soft, was 256; hard 4096)" in result.stderr, result.stderr
