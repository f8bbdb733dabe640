"""Helpers shared by the config tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomli_w

from gpuci_tui.core.config.loader import (
    AgentsConfig,
    AzureConfig,
    Config,
    ConfigError,
    VolumeConfig,
    load_config,
)
from gpuci_tui.core.engine.settings import SupervisorConfig

URL = "https://dev.azure.com/acme"


def base_doc() -> dict[str, Any]:
    return {
        "azure": {"url": URL, "pool": "gpu"},
        "agents": {
            "count": 2,
            "image": "registry.example/gpu-agent:cuda12",
            "name_prefix": "gpu01",
        },
    }


def write(path: Path, doc: dict[str, Any] | str) -> Path:
    path.write_text(doc if isinstance(doc, str) else tomli_w.dumps(doc), encoding="utf-8")
    return path


def problems(tmp_path: Path, doc: dict[str, Any] | str, **kwargs: Any) -> list[str]:
    """The lines of the error `load_config` raises, without the file name."""
    path = write(tmp_path / "config.toml", doc)
    with pytest.raises(ConfigError) as info:
        load_config(path, **kwargs)
    lines = str(info.value).splitlines()
    assert all(line.startswith(f"{path}: ") for line in lines)
    return [line.removeprefix(f"{path}: ") for line in lines]


def with_value(section: str, key: str, value: Any) -> dict[str, Any]:
    doc = base_doc()
    doc.setdefault(section, {})[key] = value
    return doc


def full_config(tmp_path: Path) -> Config:
    data = tmp_path / "imagenet"
    data.mkdir(exist_ok=True)
    return Config(
        azure=AzureConfig(url=URL, pool="gpu pool"),
        agents=AgentsConfig(
            count=4,
            image="registry.example:5000/team/gpu-agent:cuda12.4",
            name_prefix="gpu01",
            network="host",
            gpus="per-agent",
            volumes=(
                VolumeConfig(host=str(data), container="/datasets/imagenet", env="IMAGENET_DIR"),
                VolumeConfig(host=str(tmp_path), container="/scratch", env=None),
            ),
            oom_score_adj=500,
            mem_limit="64g",
            docker_socket=True,
        ),
        supervisor=SupervisorConfig(poll_interval=5.0, park_after=3, stop_timeout=60.0),
        keys={"drain": "ctrl+d", "quit": "q,f10"},
    )
