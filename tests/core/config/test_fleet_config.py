"""``[fleet]`` and ``--host``: what a host entry may be, the exact messages, labels, round trips."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpuci_tui.core.config.file import config_to_toml
from gpuci_tui.core.config.fleet import FleetConfig, check_fleet_table, load_fleet, parse_cli_hosts
from gpuci_tui.core.config.fleet_host import FleetHost, parse_target, validate_host_entry
from gpuci_tui.core.config.loader import ConfigError, load_config, save_config
from tests.ui.scenarios import sample_config


@pytest.mark.parametrize(
    ("text", "target", "user", "hostname", "port"),
    [
        ("gpu2", "gpu2", None, "gpu2", None),
        ("ci@gpu2", "ci@gpu2", "ci", "gpu2", None),
        ("ci@gpu2.lab.example:2222", "ci@gpu2.lab.example:2222", "ci", "gpu2.lab.example", 2222),
        ("root@127.0.0.1:22", "root@127.0.0.1:22", "root", "127.0.0.1", 22),
        ("ops@[::1]:2200", "ops@[::1]:2200", "ops", "::1", 2200),
        ("[fe80::1]", "[fe80::1]", None, "fe80::1", None),
        ("gpu_jump-2", "gpu_jump-2", None, "gpu_jump-2", None),  # an alias from ~/.ssh/config
        ("  ci@gpu2  ", "ci@gpu2", "ci", "gpu2", None),
    ],
)
def test_targets_that_ssh_takes(
    text: str, target: str, user: str | None, hostname: str, port: int | None
) -> None:
    host = parse_target(text, "fleet.hosts[0]")
    assert (host.target, host.user, host.hostname, host.port) == (target, user, hostname, port)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ci@gpu 2", 'must not contain spaces; write [user@]host[:port], e.g. "ci@gpu2" or '
         '"ci@gpu2:2222"; got "ci@gpu 2"'),
        ("", 'is empty; write [user@]host[:port], e.g. "ci@gpu2" or "ci@gpu2:2222"'),
        ("-oProxyCommand=touch /tmp/x", "must not contain spaces; write [user@]host[:port], e.g. "
         '"ci@gpu2" or "ci@gpu2:2222"; got "-oProxyCommand=touch /tmp/x"'),
        ("-oProxyCommand=x", "must not start with '-' (ssh would read it as an option); got "
         '"-oProxyCommand=x"'),
        ("ssh://ci@gpu2", 'must be [user@]host[:port] without a scheme, e.g. "ci@gpu2" or '
         '"ci@gpu2:2222"; got "ssh://ci@gpu2"'),
        ("a@b@gpu2", "has more than one '@'; write user@host, got \"a@b@gpu2\""),
        ("@gpu2", "has an empty user name; write user@host or leave the user out"),
        ("c;i@gpu2", 'has an invalid user name "c;i"; write user@host or leave the user out'),
        ("ci@", 'is missing the host name; e.g. "ci@gpu2" or "ci@gpu2:2222", got "ci@"'),
        ("ci@gpu2:", 'has an invalid port "" (a number from 1 to 65535); got "ci@gpu2:"'),
        ("ci@gpu2:99999", 'has an invalid port "99999" (a number from 1 to 65535); got '
         '"ci@gpu2:99999"'),
        ("ci@gpu2:ssh", 'has an invalid port "ssh" (a number from 1 to 65535); got "ci@gpu2:ssh"'),
        ("::1", 'has an IPv6 address without brackets; write e.g. "[::1]:22", got "::1"'),
        ("[::1", "has '[' without ']'; e.g. \"[::1]:22\", got \"[::1\""),
        ("[gpu2]:22", 'has "gpu2" in brackets, which is not an IPv6 address'),
        ("gpu$2", "has an invalid host name (letters, digits, '.', '-' and '_'; a name from "
         '~/.ssh/config works too), got "gpu$2"'),
        (22, 'must be [user@]host[:port] in quotes, e.g. "ci@gpu2" or "ci@gpu2:2222", or a table '
         '{ host = "ci@gpu2", label = "gpu2" }; got 22'),
    ],
)  # fmt: skip
def test_bad_entries_say_what_is_wrong_and_what_to_write(value: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_host_entry(value, "fleet.hosts[1]")
    assert str(info.value) == f"fleet.hosts[1]: {message}"


def test_a_table_entry_carries_label_config_and_command() -> None:
    host = validate_host_entry(
        {"host": "ci@gpu4", "label": "a100", "config": "~/gpu.toml", "command": "/opt/g/gpuci-tui"},
        "fleet.hosts[0]",
    )
    assert host == FleetHost(
        "ci@gpu4", "gpu4", "ci", None, label="a100", config="~/gpu.toml", command="/opt/g/gpuci-tui"
    )
    assert host.to_entry() == {
        "host": "ci@gpu4", "label": "a100", "config": "~/gpu.toml", "command": "/opt/g/gpuci-tui"
    }  # fmt: skip


def test_a_table_entry_lists_every_problem() -> None:
    with pytest.raises(ConfigError) as info:
        validate_host_entry(
            {"host": "gpu 4", "config": "gpu.toml", "command": "gpuci-tui bridge", "lable": "x"},
            "fleet.hosts[2]",
        )
    assert [str(e) for e in info.value.errors] == [
        'fleet.hosts[2].lable: unknown key; did you mean "label"? allowed: host, label, config, '
        "command",
        'fleet.hosts[2].host: must not contain spaces; write [user@]host[:port], e.g. "ci@gpu2" or '
        '"ci@gpu2:2222"; got "gpu 4"',
        'fleet.hosts[2].config: must be an absolute path on that host, or start with "~/" (e.g. '
        '"/etc/gpuci-tui/config.toml"); got "gpu.toml"',
        "fleet.hosts[2].command: must be one program: a name on that host's PATH such as "
        '"gpuci-tui", or a path such as "/opt/gpuci-tui/bin/gpuci-tui" or '
        '"~/.local/bin/gpuci-tui" (no spaces or arguments); got "gpuci-tui bridge"',
    ]


def test_a_table_without_host() -> None:
    with pytest.raises(
        ConfigError, match=r'fleet.hosts\[0\]: is missing host; add host = "ci@gpu2"'
    ):
        validate_host_entry({"label": "gpu2"}, "fleet.hosts[0]")


def test_the_fleet_table_checks_every_key_and_repeats() -> None:
    fleet, errors = check_fleet_table(
        {
            "hosts": ["ci@gpu2", "ci@gpu2", {"host": "ci@gpu3", "label": "a"},
                      {"host": "ci@gpu5", "label": "a"}],
            "command": "rm -rf",
            "connect_timeout": 0,
            "ssh_config": "fleet_ssh",
            "host": ["gpu9"],
        }
    )  # fmt: skip
    assert fleet is None
    assert [str(e) for e in errors] == [
        'fleet.host: unknown key; did you mean "hosts"? allowed: hosts, command, ssh_config, '
        "connect_timeout",
        'fleet.command: must be one program: a name on that host\'s PATH such as "gpuci-tui", or '
        'a path such as "/opt/gpuci-tui/bin/gpuci-tui" or "~/.local/bin/gpuci-tui" (no spaces or '
        'arguments); got "rm -rf"',
        'fleet.ssh_config: must be an absolute path, or start with "~/" (e.g. "~/.ssh/fleet"); '
        'got "fleet_ssh"',
        "fleet.connect_timeout: must be a number of seconds from 1 to 300, got 0",
        "fleet.hosts[1]: repeats ci@gpu2 (given before); drop one",
        'fleet.hosts[3].label: "a" is the label of fleet.hosts[2] too; labels are unique',
    ]


def test_hosts_must_be_a_list() -> None:
    _, errors = check_fleet_table({"hosts": "ci@gpu2"})
    assert [str(e) for e in errors] == [
        'fleet.hosts: must be a list such as ["ci@gpu2", "ci@gpu3:2222"], got "ci@gpu2"'
    ]


def test_labels_are_unique_and_readable() -> None:
    fleet, errors = check_fleet_table(
        {
            "hosts": [
                "ci@gpu2",
                "root@127.0.0.1:2201",
                "root@127.0.0.1:2202",
                {"host": "ci@gpu9", "label": "a100"},
                {"host": "ci@gpu2", "config": "/etc/other.toml"},
            ]
        }
    )
    assert errors == []
    assert fleet is not None
    assert fleet.labels() == ("gpu2", "127.0.0.1:2201", "127.0.0.1:2202", "a100", "gpu2#2")


def test_cli_hosts_name_the_option() -> None:
    assert [h.target for h in parse_cli_hosts(["ci@gpu2", "gpu3:2222"])] == ["ci@gpu2", "gpu3:2222"]
    with pytest.raises(ConfigError) as info:
        parse_cli_hosts(["gpu 2", "ci@gpu3", "ci@gpu3"])
    assert [str(e) for e in info.value.errors] == [
        '--host: must not contain spaces; write [user@]host[:port], e.g. "ci@gpu2" or '
        '"ci@gpu2:2222"; got "gpu 2"',
        "--host: repeats ci@gpu3 (given before); drop one",
    ]


def test_a_fleet_only_file_is_enough_for_the_console(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[fleet]\nhosts = ["ci@gpu2", { host = "ci@gpu3", label = "a100" }]\n'
        'command = "~/.local/bin/gpuci-tui"\nconnect_timeout = 5\n[keys]\ndrain = "ctrl+d"\n'
    )
    fleet, keys = load_fleet(path)
    assert [h.target for h in fleet.hosts] == ["ci@gpu2", "ci@gpu3"]
    assert fleet.labels() == ("gpu2", "a100")
    assert fleet.command_of(fleet.hosts[0]) == "~/.local/bin/gpuci-tui"
    assert fleet.connect_timeout == 5.0
    assert keys == {"drain": "ctrl+d"}


def test_load_fleet_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[fleet]\nhosts = ["ci@gpu 2"]\n')
    with pytest.raises(ConfigError) as info:
        load_fleet(path)
    assert str(info.value).startswith(f"{path}: fleet.hosts[0]: must not contain spaces")


def test_a_daemon_config_keeps_its_fleet_through_save_and_load(tmp_path: Path) -> None:
    fleet = FleetConfig(
        hosts=(
            parse_target("ci@gpu2", "x"),
            validate_host_entry({"host": "gpu3", "label": "b"}, "x"),
        ),
        command="/opt/gpuci-tui/bin/gpuci-tui",
        connect_timeout=4.0,
    )
    config = dataclasses.replace(sample_config(), fleet=fleet)
    path = tmp_path / "config.toml"
    save_config(config, path)
    text = path.read_text()
    assert '[fleet]\nhosts = [\n    "ci@gpu2",\n    { host = "gpu3", label = "b" },\n]' in text
    loaded = load_config(path)
    assert loaded.fleet == fleet
    assert config_to_toml(loaded) == text


def test_a_config_without_fleet_writes_no_fleet_section(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    save_config(sample_config(), path)
    assert "[fleet]" not in path.read_text()
    assert load_config(path).fleet == FleetConfig()


def test_a_bad_fleet_entry_is_reported_by_load_config_with_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    save_config(sample_config(), path)
    path.write_text(path.read_text() + '\n[fleet]\nhosts = ["ci@gpu2:0"]\n')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (
        f'{path}: fleet.hosts[0]: has an invalid port "0" (a number from 1 to 65535); got '
        '"ci@gpu2:0"'
    )
