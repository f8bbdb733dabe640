"""``[docker]``: the disk watermarks, their defaults, exact messages and the round trip."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config.docker_disk import DockerConfig, size_bytes
from gpuci_tui.core.config.loader import load_config, save_config
from tests.core.config_helpers import base_doc, problems, with_value, write

GIB = 1024**3


def test_defaults_when_the_section_is_absent(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "config.toml", base_doc()))
    assert config.docker == DockerConfig(min_free=None, hard_floor="2GiB", check_interval=60.0)
    assert config.docker.min_free_bytes is None
    assert config.docker.hard_floor_bytes == 2 * GIB


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("20g", 20 * GIB),
        ("20G", 20 * GIB),
        ("20GiB", 20 * GIB),
        ("20 GiB", 20 * GIB),
        ("20GB", 20 * 10**9),
        ("1.5t", int(1.5 * 1024**4)),
        ("512MiB", 512 * 1024**2),
        ("500mb", 500 * 10**6),
        ("4096", 4096),
    ],
)
def test_sizes(text: str, expected: int) -> None:
    assert size_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "g", "20x", "20iB", "20b", "-1g", "20 gigs"])
def test_not_sizes(text: str) -> None:
    with pytest.raises(ValueError):
        size_bytes(text)


def test_values_are_read(tmp_path: Path) -> None:
    doc = base_doc()
    doc["docker"] = {"min_free": "50GiB", "hard_floor": "5g", "check_interval": 10}
    config = load_config(write(tmp_path / "config.toml", doc))
    assert config.docker.min_free_bytes == 50 * GIB
    assert config.docker.hard_floor_bytes == 5 * GIB
    assert config.docker.check_interval == 10.0


_SIZE_PROBLEM = (
    'must be a size in quotes like "20GiB", "50g" or "500MB" (units k, m, g, t or '
    "KiB…TiB binary, KB…TB decimal), got "
)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("min_free", "lots", f'docker.min_free: {_SIZE_PROBLEM}"lots"'),
        (
            "min_free",
            20,
            'docker.min_free: must be a size in quotes like "20GiB", "50g" or "500MB", got 20',
        ),
        (
            "min_free",
            "0g",
            'docker.min_free: must be more than 0 (leave it out: never remove), got "0g"',
        ),
        ("hard_floor", "2 parsecs", f'docker.hard_floor: {_SIZE_PROBLEM}"2 parsecs"'),
        (
            "check_interval",
            0,
            "docker.check_interval: must be a number of seconds from 1 to 3600, got 0",
        ),
    ],
)
def test_exact_messages(tmp_path: Path, key: str, value: Any, message: str) -> None:
    assert problems(tmp_path, with_value("docker", key, value)) == [message]


def test_the_hard_floor_must_be_below_min_free(tmp_path: Path) -> None:
    doc = base_doc()
    doc["docker"] = {"min_free": "10g", "hard_floor": "10GiB"}
    assert problems(tmp_path, doc) == [
        "docker.hard_floor: must be below min_free (10g): the hard floor stops pulls, "
        'min_free starts removing images first, got "10GiB"'
    ]
    # Against the default floor too.
    assert problems(tmp_path, with_value("docker", "min_free", "1g")) == [
        "docker.hard_floor: must be below min_free (1g): the hard floor stops pulls, "
        'min_free starts removing images first, got "2GiB"'
    ]


def test_unknown_key(tmp_path: Path) -> None:
    (line,) = problems(tmp_path, with_value("docker", "min_fre", "20g"))
    assert line.startswith("docker.min_fre")


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    config = load_config(write(path, base_doc()))
    changed = dataclasses.replace(config, docker=DockerConfig(min_free="40g", hard_floor="4g"))
    save_config(changed, path)
    text = path.read_text()
    assert "[docker]" in text and 'min_free = "40g"' in text
    assert load_config(path).docker == changed.docker
    # Defaults are not written.
    save_config(config, path)
    assert "[docker]" not in path.read_text()
