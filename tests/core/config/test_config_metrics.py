"""``[metrics]``: off by default, exact messages for bad addresses, loopback unless allowed."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config.loader import (
    MetricsConfig,
    config_to_toml,
    load_config,
    save_config,
    validate_config,
)
from gpuci_tui.core.config.observe import parse_listen
from tests.core.config_helpers import base_doc, full_config, problems, with_value, write

EXAMPLE = 'e.g. "127.0.0.1:9464"'
REMOTE = (
    'metrics.listen: is "0.0.0.0:9464", which other machines can reach, and /metrics has no '
    'authentication; use "127.0.0.1:9464" (with a reverse proxy or an ssh tunnel for remote '
    "scrapes), or add allow_remote = true to [metrics] if that is intended"
)


def test_off_by_default(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "config.toml", base_doc()))
    assert config.metrics == MetricsConfig(listen="", allow_remote=False)


@pytest.mark.parametrize(
    ("listen", "expected"),
    [
        ("127.0.0.1:9464", ("127.0.0.1", 9464)),
        ("localhost:9100", ("127.0.0.1", 9100)),
        (" 127.0.0.2:1 ", ("127.0.0.2", 1)),
    ],
)
def test_loopback_addresses_are_accepted(tmp_path: Path, listen: str, expected: Any) -> None:
    config = load_config(write(tmp_path / "config.toml", with_value("metrics", "listen", listen)))
    assert config.metrics.listen == listen.strip()
    assert parse_listen(config.metrics.listen) == expected


@pytest.mark.parametrize(
    ("listen", "message"),
    [
        (
            "9464",
            f"must be HOST:PORT, {EXAMPLE} (a port alone is not enough: say which address to "
            'listen on), got "9464"',
        ),
        (
            "host:notaport",
            f'must end with a port from 1 to 65535, {EXAMPLE}, got "host:notaport"',
        ),
        ("127.0.0.1:0", f'must end with a port from 1 to 65535, {EXAMPLE}, got "127.0.0.1:0"'),
        (
            "127.0.0.1:65536",
            f'must end with a port from 1 to 65535, {EXAMPLE}, got "127.0.0.1:65536"',
        ),
        (
            "[::1]:9464",
            f"must be an IPv4 address and a port, {EXAMPLE}; IPv6 addresses are not supported, "
            'got "[::1]:9464"',
        ),
        (
            "metrics.example:9464",
            f"must be an IPv4 address (or localhost) and a port, {EXAMPLE}, "
            'got "metrics.example:9464"',
        ),
        (
            ":9464",
            f"must be HOST:PORT, {EXAMPLE} (a port alone is not enough: say which "
            'address to listen on), got ":9464"',
        ),  # fmt: skip
        (9464, 'must be a string like "127.0.0.1:9464" (or "" for no metrics), got 9464'),
    ],
)
def test_bad_listen_values_say_what_is_wanted(tmp_path: Path, listen: Any, message: str) -> None:
    assert problems(tmp_path, with_value("metrics", "listen", listen)) == [
        f"metrics.listen: {message}"
    ]


def test_remote_address_is_refused_unless_allowed(tmp_path: Path) -> None:
    doc = with_value("metrics", "listen", "0.0.0.0:9464")
    assert problems(tmp_path, doc) == [REMOTE]
    doc["metrics"]["allow_remote"] = True
    config = load_config(write(tmp_path / "config.toml", doc))
    assert config.metrics == MetricsConfig(listen="0.0.0.0:9464", allow_remote=True)


def test_allow_remote_must_be_a_boolean(tmp_path: Path) -> None:
    doc = with_value("metrics", "listen", "0.0.0.0:9464")
    doc["metrics"]["allow_remote"] = "yes"
    # Only the wrong value is reported: the remote rule waits until both values are valid.
    assert problems(tmp_path, doc) == ['metrics.allow_remote: must be true or false, got "yes"']


def test_unknown_key_suggests(tmp_path: Path) -> None:
    assert problems(tmp_path, with_value("metrics", "listen_on", "127.0.0.1:9464")) == [
        'metrics.listen_on: unknown key; did you mean "listen"? allowed: listen, allow_remote'
    ]


def test_in_memory_config_is_checked_too(tmp_path: Path) -> None:
    bad = dataclasses.replace(full_config(tmp_path), metrics=MetricsConfig(listen="0.0.0.0:9464"))
    assert [str(e) for e in validate_config(bad)] == [REMOTE]


def test_save_writes_only_a_set_table_and_round_trips(tmp_path: Path) -> None:
    config = full_config(tmp_path)
    assert "[metrics]" not in config_to_toml(config)
    changed = dataclasses.replace(config, metrics=MetricsConfig(listen="127.0.0.1:9464"))
    text = config_to_toml(changed)
    assert '[metrics]\nlisten = "127.0.0.1:9464"\n' in text
    assert "allow_remote" not in text
    path = tmp_path / "config.toml"
    save_config(changed, path)
    assert dataclasses.replace(load_config(path), path=None) == changed
