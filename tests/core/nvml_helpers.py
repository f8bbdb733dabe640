"""Helpers for tests that drive the fake libnvidia-ml.so.1 (tests/fixtures/fake_nvml.c)."""

from __future__ import annotations

from pathlib import Path


class NvmlState:
    """The fake library's state file (``$FAKE_NVML_STATE``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, text: str) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(self.path)  # atomic: the library never reads half a file
