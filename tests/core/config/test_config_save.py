"""Configuration: volumes and supervisor tables, in-memory validation, atomic saving, identity."""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config import validate as config_validate
from gpuci_tui.core.config.docker_disk import DockerConfig
from gpuci_tui.core.config.loader import (
    AgentsConfig,
    AzureConfig,
    Config,
    ConfigError,
    ConfigErrors,
    GpuConfig,
    HistoryConfig,
    MetricsConfig,
    VolumeConfig,
    config_hash,
    config_to_toml,
    instance_id,
    load_config,
    save_config,
    validate_config,
    validate_volume,
)
from gpuci_tui.core.engine.settings import SupervisorConfig
from tests.core.config_helpers import (
    URL,
    full_config,
    problems,
    with_value,
    write,
)

# --------------------------------------------------------------------------- volumes


def volume_doc(*volumes: dict[str, Any]) -> dict[str, Any]:
    return with_value("agents", "volumes", list(volumes))


def test_volumes_are_normalised(tmp_path: Path) -> None:
    doc = volume_doc(
        {"host": f"{tmp_path}/./", "container": "/datasets//imagenet/", "env": " IMAGENET_DIR "},
        {"host": str(tmp_path), "container": "/scratch", "env": ""},
    )
    config = load_config(write(tmp_path / "c.toml", doc))
    assert config.agents.volumes == (
        VolumeConfig(host=str(tmp_path), container="/datasets/imagenet", env="IMAGENET_DIR"),
        VolumeConfig(host=str(tmp_path), container="/scratch", env=None),
    )


@pytest.mark.parametrize(
    ("volume", "problems_found"),
    [
        ({"host": "/no/such/dir", "container": "/data"},
         ["agents.volumes[0].host: /no/such/dir does not exist on this host; give an existing "
          "directory"]),
        ({"host": "data", "container": "data"},
         ['agents.volumes[0].host: must be an absolute path (starting with /), got "data"',
          'agents.volumes[0].container: must be an absolute path (starting with /), got "data"']),
        ({"host": "TMP", "container": "/"},
         ["agents.volumes[0].container: / is a system path in the container; use e.g. "
          "/datasets/NAME"]),
        ({"host": "TMP", "container": "/usr/local/data"},
         ["agents.volumes[0].container: /usr/local/data is a system path in the container; use "
          "e.g. /datasets/NAME"]),
        ({"host": "TMP", "container": "/datasets/../etc"},
         ["agents.volumes[0].container: /etc is a system path in the container; use e.g. "
          "/datasets/NAME"]),
        ({"host": "TMP", "container": "/run/azp"},
         ["agents.volumes[0].container: /run/azp is a system path in the container; use e.g. "
          "/datasets/NAME"]),
        ({"host": "TMP", "container": "/data", "env": "1DIR"},
         ["agents.volumes[0].env: must be a variable name (letters, digits and '_', not starting "
          'with a digit), got "1DIR"']),
        ({"host": "TMP", "container": "/data", "env": "AZP_TOKEN_FILE"},
         ['agents.volumes[0].env: "AZP_TOKEN_FILE" is reserved (AZP_* variables belong to the '
          'agent); pick another, e.g. "DATA_DIR"']),
        ({"host": "TMP", "container": "/data", "env": "azp_url"},
         ['agents.volumes[0].env: "azp_url" is reserved (AZP_* variables belong to the agent); '
          'pick another, e.g. "DATA_DIR"']),
        ({"host": "TMP", "container": "/data", "env": "PATH"},
         ['agents.volumes[0].env: "PATH" is reserved (the agent needs it); pick another, e.g. '
          '"DATA_DIR"']),
        ({"host": "TMP", "container": 5},
         ["agents.volumes[0].container: must be an absolute path in quotes, got 5"]),
    ],
)  # fmt: skip
def test_bad_volumes(tmp_path: Path, volume: dict[str, Any], problems_found: list[str]) -> None:
    volume = {k: str(tmp_path) if v == "TMP" else v for k, v in volume.items()}
    assert problems(tmp_path, volume_doc(volume)) == problems_found


def test_host_path_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    assert problems(tmp_path, volume_doc({"host": f"{tmp_path}/file", "container": "/d"})) == [
        f"agents.volumes[0].host: {tmp_path}/file is not a directory; give an existing directory"
    ]


def test_container_paths_and_env_names_are_not_used_twice(tmp_path: Path) -> None:
    doc = volume_doc(
        {"host": str(tmp_path), "container": "/data", "env": "DATA_DIR"},
        {"host": str(tmp_path), "container": "/data/", "env": "DATA_DIR"},
    )
    assert problems(tmp_path, doc) == [
        "agents.volumes[1].container: /data is already used by another volume",
        'agents.volumes[1].env: "DATA_DIR" is already used by another volume',
    ]


def test_volumes_must_be_a_list_of_tables(tmp_path: Path) -> None:
    assert problems(tmp_path, with_value("agents", "volumes", {"host": "/x"})) == [
        "agents.volumes: must be a list of [[agents.volumes]] tables, got a table"
    ]
    assert problems(tmp_path, with_value("agents", "volumes", ["/data"])) == [
        'agents.volumes[0]: must be a table with host and container, got "/data"'
    ]


def test_validate_volume_for_the_wizard(tmp_path: Path) -> None:
    first = validate_volume(str(tmp_path), "/data/", "DATA_DIR")
    assert first == VolumeConfig(host=str(tmp_path), container="/data", env="DATA_DIR")
    with pytest.raises(ConfigErrors) as info:
        validate_volume(str(tmp_path), "/data", "DATA_DIR", existing=[first])
    assert [str(e) for e in info.value.errors] == [
        "agents.volumes[1].container: /data is already used by another volume",
        'agents.volumes[1].env: "DATA_DIR" is already used by another volume',
    ]
    with pytest.raises(ConfigError) as one:
        validate_volume("/no/such", "/other", None, existing=[first], index=4)
    assert not isinstance(one.value, ConfigErrors)
    assert one.value.key == "agents.volumes[4].host"


# --------------------------------------------------------------------------- supervisor


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("poll_interval", 0, "must be a positive number of seconds, got 0"),
        ("poll_interval", -1.5, "must be a positive number of seconds, got -1.5"),
        ("poll_interval", "10", 'must be a positive number of seconds, got "10"'),
        ("stop_timeout", float("inf"), "must be a positive number of seconds, got inf"),
        ("healthy_after", float("nan"), "must be a positive number of seconds, got nan"),
        ("backoff_base", True, "must be a positive number of seconds, got true"),
        ("park_after", 0, "must be a whole number of at least 1, got 0"),
        ("park_after", 2.5, "must be a whole number of at least 1, got 2.5"),
        ("backoff_max", 1.0, "must be at least backoff_base (2), got 1"),
    ],
)
def test_bad_supervisor_values(tmp_path: Path, key: str, value: Any, problem: str) -> None:
    assert problems(tmp_path, with_value("supervisor", key, value)) == [
        f"supervisor.{key}: {problem}"
    ]


def test_supervisor_whole_seconds_become_floats(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "c.toml", with_value("supervisor", "poll_interval", 3)))
    assert config.supervisor.poll_interval == 3.0
    assert isinstance(config.supervisor.poll_interval, float)


# --------------------------------------------------------------------------- in memory


def test_validate_config_in_memory(tmp_path: Path) -> None:
    good = full_config(tmp_path)
    assert validate_config(good) == []
    assert [str(e) for e in validate_config(good, gpu_count=2)] == [
        'agents.count: is 4 with gpus = "per-agent", but this host has 2 GPUs; lower count to 2 '
        'or use gpus = "all" or "none"'
    ]
    bad = dataclasses.replace(
        good,
        azure=AzureConfig(url="https://dev.azure.com/acme/proj", pool=""),
        agents=dataclasses.replace(good.agents, count=0, volumes=(VolumeConfig("/nope", "/d"),)),
        keys={"drain": ""},
    )
    assert [e.key for e in validate_config(bad)] == [
        "azure.url", "azure.pool", "agents.count", "agents.volumes[0].host", "keys.drain",
    ]  # fmt: skip


def test_config_error_formats() -> None:
    assert str(ConfigError("is wrong")) == "is wrong"
    assert str(ConfigError("is wrong", key="a.b")) == "a.b: is wrong"
    assert (
        str(ConfigError("is wrong", key="a.b", path=Path("/p/c.toml")))
        == "/p/c.toml: a.b: is wrong"
    )
    several = ConfigErrors([ConfigError("x", key="a"), ConfigError("y", key="b")], path=Path("/c"))
    assert str(several) == "/c: a: x\n/c: b: y"
    assert isinstance(several, ConfigError)


# --------------------------------------------------------------------------- saving


def test_round_trip(tmp_path: Path) -> None:
    config = full_config(tmp_path)
    path = tmp_path / "cfg" / "config.toml"

    save_config(config, path)

    assert load_config(path) == dataclasses.replace(config, path=path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    text = path.read_text()
    assert text.count("[[agents.volumes]]") == 2
    assert text.startswith("# gpuci-tui configuration")


def test_round_trip_of_defaults_writes_no_optional_values(tmp_path: Path) -> None:
    config = Config(
        azure=AzureConfig(url=URL, pool="gpu"),
        agents=AgentsConfig(count=1, image="agent:1", name_prefix="h"),
    )
    path = tmp_path / "config.toml"
    save_config(config, path)
    assert load_config(path) == dataclasses.replace(config, path=path)
    body = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    assert body == [
        "[azure]", f'url = "{URL}"', 'pool = "gpu"', "[agents]", "count = 1",
        'image = "agent:1"', 'name_prefix = "h"', 'network = "bridge"', 'gpus = "all"',
    ]  # fmt: skip


def test_saving_normalises_and_never_writes_a_secret_key(tmp_path: Path) -> None:
    config = dataclasses.replace(full_config(tmp_path), azure=AzureConfig(URL + "/", " gpu "))
    path = tmp_path / "config.toml"
    save_config(config, path)
    assert load_config(path).azure == AzureConfig(URL, "gpu")
    assert config_to_toml(load_config(path)) == path.read_text()
    for word in ("pat =", "token =", "password"):
        assert word not in path.read_text().lower()


def test_invalid_config_is_not_saved(tmp_path: Path) -> None:
    config = dataclasses.replace(
        full_config(tmp_path), agents=AgentsConfig(count=0, image="BAD IMAGE", name_prefix="h")
    )
    path = tmp_path / "config.toml"
    with pytest.raises(ConfigErrors) as info:
        save_config(config, path)
    assert [e.key for e in info.value.errors] == ["agents.count", "agents.image"]
    assert not path.exists()


def test_previous_good_file_is_kept_as_bak(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    first = full_config(tmp_path)
    save_config(first, path)
    first_text = path.read_text()
    second = dataclasses.replace(first, agents=dataclasses.replace(first.agents, count=2))

    save_config(second, path)
    save_config(second, path)  # unchanged: .bak keeps the last different version

    assert (tmp_path / "config.toml.bak").read_text() == first_text
    assert load_config(path).agents.count == 2
    assert stat.S_IMODE((tmp_path / "config.toml.bak").stat().st_mode) == 0o600


def test_failed_write_leaves_the_old_file_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "config.toml"
    save_config(full_config(tmp_path), path)
    before = path.read_bytes()

    def no_space(src: str, dst: str) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", no_space)
    changed = dataclasses.replace(full_config(tmp_path), keys={"drain": "d"})
    with pytest.raises(ConfigError) as info:
        save_config(changed, path)

    assert str(info.value) == (
        f"{path}: cannot write in the directory {tmp_path} (No space left on device, ENOSPC); "
        "check its permissions and the free space, or choose another file with --config"
    )
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml", "imagenet"]


def test_broken_file_is_not_overwritten_unless_asked(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[azure\nurl = 'hand edited'\n")
    with pytest.raises(ConfigError) as info:
        save_config(full_config(tmp_path), path)
    assert str(info.value) == (
        f"{path}: exists but is not valid TOML, so it was not replaced (your edits would be "
        "lost); fix it or move it away, then save again"
    )
    assert path.read_text() == "[azure\nurl = 'hand edited'\n"

    save_config(full_config(tmp_path), path, overwrite_broken=True)

    assert load_config(path).agents.count == 4
    assert (tmp_path / "config.toml.broken").read_text() == "[azure\nurl = 'hand edited'\n"
    assert not (tmp_path / "config.toml.bak").exists()


def test_unwritable_directory_is_named_with_the_reason(tmp_path: Path) -> None:
    # Tests run as root, where permission bits do not stop writes: a parent that is
    # a regular file fails for root too.
    (tmp_path / "blocker").write_text("not a directory")
    path = tmp_path / "blocker" / "gpuci-tui" / "config.toml"
    with pytest.raises(ConfigError) as info:
        save_config(full_config(tmp_path), path)
    assert str(info.value) == (
        f"{path}: cannot create the directory {path.parent} (Not a directory, ENOTDIR)"
    )


def test_a_symlinked_config_is_written_through(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "gpuci.toml"
    real.parent.mkdir()
    save_config(full_config(tmp_path), real)
    link = tmp_path / "config.toml"
    link.symlink_to(real)
    changed = dataclasses.replace(full_config(tmp_path), keys={})

    save_config(changed, link)

    assert link.is_symlink()
    assert load_config(real).keys == {}


# --------------------------------------------------------------------------- identity


def test_instance_id_is_short_stable_and_depends_on_org_pool_prefix(tmp_path: Path) -> None:
    config = full_config(tmp_path)
    ident = instance_id(config)
    assert len(ident) == 12 and int(ident, 16) >= 0
    assert instance_id(dataclasses.replace(config, keys={})) == ident
    upper = dataclasses.replace(config, azure=AzureConfig(URL.upper(), config.azure.pool))
    assert instance_id(upper) == ident
    other_pool = dataclasses.replace(config, azure=AzureConfig(URL, "cpu"))
    other_prefix = dataclasses.replace(
        config, agents=dataclasses.replace(config.agents, name_prefix="gpu02")
    )
    assert len({ident, instance_id(other_pool), instance_id(other_prefix)}) == 3


def test_config_hash_changes_with_the_container_only(tmp_path: Path) -> None:
    config = full_config(tmp_path)
    digest = config_hash(config)
    assert len(digest) == 12
    same = dataclasses.replace(
        config,
        agents=dataclasses.replace(config.agents, count=1),
        supervisor=SupervisorConfig(poll_interval=1.0),
    )
    assert config_hash(same) == digest
    for change in (
        {"image": "registry.example/gpu-agent:cuda13"}, {"network": "bridge"}, {"gpus": "all"},
        {"volumes": ()}, {"oom_score_adj": 0}, {"mem_limit": None}, {"docker_socket": False},
    ):  # fmt: skip
        changed = dataclasses.replace(config, agents=dataclasses.replace(config.agents, **change))
        assert config_hash(changed) != digest, change


def test_identity_matches_the_agent_spec_labels(tmp_path: Path) -> None:
    # agentspec labels containers with its own copy; both must agree or adoption breaks.
    from gpuci_tui.core.docker import agentspec

    config = full_config(tmp_path)
    assert agentspec.instance_id(config) == instance_id(config)
    assert agentspec.config_hash(config) == config_hash(config)


def test_every_agents_field_has_a_rule() -> None:
    # A new dataclass field without a rule would be silently accepted unchecked.
    # gpu_ids is not a key of its own: it is written inside gpus (see config_groups).
    fields = {f"agents.{f.name}" for f in dataclasses.fields(AgentsConfig)} - {
        "agents.volumes",
        "agents.gpu_ids",
    }
    fields |= {f"azure.{f.name}" for f in dataclasses.fields(AzureConfig)}
    fields |= {f"supervisor.{f.name}" for f in dataclasses.fields(SupervisorConfig)}
    fields |= {f"gpu.{f.name}" for f in dataclasses.fields(GpuConfig)}
    fields |= {f"history.{f.name}" for f in dataclasses.fields(HistoryConfig)}
    fields |= {f"metrics.{f.name}" for f in dataclasses.fields(MetricsConfig)}
    fields |= {f"docker.{f.name}" for f in dataclasses.fields(DockerConfig)}
    from gpuci_tui.core.config import loader as config_module

    assert set(config_module._FIELDS) == fields
    assert config_validate.MAX_AGENTS == 64
