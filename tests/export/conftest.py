"""Shared inputs for the Kubernetes export tests: a config like the README's, and its files."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, VolumeConfig
from gpuci_tui.core.export.k8s import DEFAULT_GROUP, ExportOptions, render_manifests

AZURE = AzureConfig(url="https://dev.azure.com/acme", pool="gpu")
AGENTS = AgentsConfig(
    count=4,
    image="registry.example/gpuci-agent:amd64-ubuntu24.04-cuda12.8",
    name_prefix="gpuhost",
    gpus="per-agent",
    volumes=(
        VolumeConfig("/data/imagenet", "/datasets/imagenet", "IMAGENET_DIR"),
        VolumeConfig("/data/coco", "/datasets/coco", None),
    ),
    mem_limit="64g",
)

Render = Callable[..., dict[str, Any]]


def documents(files: dict[str, str]) -> dict[str, Any]:
    """Every YAML document of the export by kind (each file holds one)."""
    out: dict[str, Any] = {}
    for name, text in files.items():
        if name.endswith(".yaml"):
            (doc,) = list(yaml.safe_load_all(text))
            out[doc["kind"]] = doc
    return out


@pytest.fixture
def render() -> Render:
    """Render the export of ``AGENTS`` with changes, and parse it: kind -> document, plus files."""

    def run(agents: AgentsConfig = AGENTS, azure: AzureConfig = AZURE, **options: Any) -> Any:
        files = render_manifests(azure, agents, DEFAULT_GROUP, ExportOptions(**options))
        return {**documents(files), "files": files}

    return run
