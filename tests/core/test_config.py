"""Loading, validating and saving config.toml: every rule, with its exact message."""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from gpuci_tui.core import config_validate
from gpuci_tui.core.config import (
    AgentsConfig,
    AzureConfig,
    Config,
    ConfigError,
    ConfigErrors,
    SupervisorConfig,
    VolumeConfig,
    config_hash,
    config_to_toml,
    default_name_prefix,
    instance_id,
    load_config,
    save_config,
    validate_config,
    validate_count,
    validate_name_prefix,
    validate_org_url,
    validate_volume,
)

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
        keys={"drain": "x", "app.quit": "ctrl+q"},
    )


# --------------------------------------------------------------------------- loading


def test_minimal_file_loads_with_defaults(tmp_path: Path) -> None:
    doc = base_doc()
    del doc["agents"]["name_prefix"]
    path = write(tmp_path / "config.toml", doc)

    config = load_config(path)

    assert config.path == path
    assert config.azure == AzureConfig(url=URL, pool="gpu")
    assert config.agents.name_prefix == default_name_prefix()
    assert (config.agents.network, config.agents.gpus, config.agents.volumes) == (
        "bridge",
        "all",
        (),
    )
    assert config.supervisor == SupervisorConfig()
    assert config.keys == {}


def test_missing_file_says_how_to_create_one(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (
        f'{path}: no configuration file here; create one with "gpuci-tui setup" '
        "(or point --config or GPUCI_CONFIG at another file)"
    )
    assert info.value.path == path and info.value.key is None


def test_corrupt_toml_names_line_and_column(tmp_path: Path) -> None:
    assert problems(tmp_path, '[azure]\nurl = "https://dev.azure.com/acme"\npool = \n') == [
        "line 3, column 8: not valid TOML (Invalid value); fix that line, or move the file "
        'away and run "gpuci-tui setup" to write a new one'
    ]


def test_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b'[azure]\npool = "\xff"\n')
    with pytest.raises(ConfigError, match=r'line 2: is not UTF-8 text; fix it or run "gpuci-tui'):
        load_config(path)


def test_every_problem_is_reported_at_once_section_by_section(tmp_path: Path) -> None:
    doc = base_doc()
    doc["supervisor"] = {"poll_interval": 0}
    doc["agents"].update(count="two", network="hots")
    doc["azure"]["url"] = "http://dev.azure.com/acme"
    path = write(tmp_path / "config.toml", doc)

    with pytest.raises(ConfigErrors) as info:
        load_config(path)

    assert [e.key for e in info.value.errors] == [
        "azure.url", "agents.count", "agents.network", "supervisor.poll_interval",
    ]  # fmt: skip
    assert all(e.path == path for e in info.value.errors)
    assert str(info.value) == "\n".join(str(e) for e in info.value.errors)
    assert f'{path}: agents.count: must be a whole number from 1 to 64, got "two"' in str(
        info.value
    )


def test_unknown_section_and_keys_suggest_the_closest(tmp_path: Path) -> None:
    doc = base_doc()
    doc["agnets"] = {"count": 1}
    doc["agents"]["imgae"] = "x"
    doc["agents"]["volumes"] = [{"host": str(tmp_path), "contianer": "/data"}]
    assert problems(tmp_path, doc) == [
        'agnets: unknown section; did you mean "agents"? allowed: [azure], [agents], '
        "[supervisor], [keys]",
        'agents.imgae: unknown key; did you mean "image"? allowed: count, image, name_prefix, '
        "network, gpus, volumes, oom_score_adj, mem_limit, docker_socket",
        'agents.volumes[0].contianer: unknown key; did you mean "container"? allowed: host, '
        "container, env",
        "agents.volumes[0]: is missing container",
    ]


def test_unknown_key_without_close_match_lists_the_allowed(tmp_path: Path) -> None:
    [line] = problems(tmp_path, with_value("azure", "region", "westeurope"))
    assert line == "azure.region: unknown key; allowed: url, pool"


@pytest.mark.parametrize(
    ("section", "key"),
    [("azure", "pat"), ("azure", "token"), ("agents", "azp_token"), ("supervisor", "Password")],
)
def test_pat_like_keys_are_refused_without_echoing_the_value(
    tmp_path: Path, section: str, key: str
) -> None:
    secret = "q" * 52
    [line] = problems(tmp_path, with_value(section, key, secret))
    assert line == (
        f"{section}.{key}: a PAT or password must not be in the config file: delete this line; "
        'the PAT lives in the OS keyring: store it with "gpuci-tui token set"'
    )
    assert secret not in line


def test_top_level_token_is_refused(tmp_path: Path) -> None:
    doc = base_doc()
    doc["token"] = "x" * 52
    assert problems(tmp_path, doc)[0].startswith("token: a PAT or password must not be")


def test_missing_sections_and_required_keys(tmp_path: Path) -> None:
    assert problems(tmp_path, {"agents": {"count": 1}}) == [
        "azure: is missing; add a [azure] section",
        'agents.image: is missing; add image = "REPO/IMAGE:TAG"',
    ]
    assert problems(tmp_path, {"azure": {}, "agents": {"image": "a:b"}}) == [
        'azure.url: is missing; add url = "https://dev.azure.com/ORG"',
        'azure.pool: is missing; add pool = "gpu"',
        "agents.count: is missing; add count = 2",
    ]


def test_a_section_that_is_not_a_table(tmp_path: Path) -> None:
    doc = base_doc()
    doc["supervisor"] = "fast"
    assert problems(tmp_path, doc) == ['supervisor: must be a table ([supervisor]), got "fast"']


# --------------------------------------------------------------------------- single values


@pytest.mark.parametrize(
    ("value", "got"), [("two", '"two"'), (0, "0"), (65, "65"), (True, "true"), (2.0, "2.0")]
)
def test_count_must_be_a_whole_number_from_1_to_64(tmp_path: Path, value: Any, got: str) -> None:
    assert problems(tmp_path, with_value("agents", "count", value)) == [
        f"agents.count: must be a whole number from 1 to 64, got {got}"
    ]


def test_count_bounds_are_inclusive() -> None:
    assert (validate_count(1), validate_count(64)) == (1, 64)
    with pytest.raises(ConfigError) as info:
        validate_count(True)
    assert info.value.key == "agents.count"


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("https://dev.azure.com/acme/", URL),
        ("  https://dev.azure.com/acme  ", URL),
        ("HTTPS://Dev.Azure.COM/Acme", "https://dev.azure.com/Acme"),
        ("https://dev.azure.com:443/acme", URL),
        ("https://acme.visualstudio.com/", "https://acme.visualstudio.com"),
        ("https://acme.visualstudio.com/DefaultCollection", "https://acme.visualstudio.com"),
        ("https://tfs.example.com/tfs/Main/", "https://tfs.example.com/tfs/Main"),
        ("http://127.0.0.1:8080/acme/", "http://127.0.0.1:8080/acme"),
        ("http://127.9.9.9/acme", "http://127.9.9.9/acme"),
        ("http://localhost:9000/acme", "http://localhost:9000/acme"),
        ("http://[::1]:8080/acme", "http://[::1]:8080/acme"),
    ],
)
def test_org_url_is_normalised(text: str, normalised: str) -> None:
    assert validate_org_url(text) == normalised


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("https://dev.azure.com/acme/project", 'must be the organisation URL, not a project or '
         'page; use "https://dev.azure.com/acme"'),
        ("https://dev.azure.com/acme/_settings/agentpools", 'must be the organisation URL, not a '
         'project or page; use "https://dev.azure.com/acme"'),
        ("https://acme.visualstudio.com/Project", 'must be the organisation URL, not a project or '
         'page; use "https://acme.visualstudio.com"'),
        ("https://dev.azure.com/", 'is missing the organisation; use "https://dev.azure.com/ORG"'),
        ("https://dev.azure.com/acme?view=x", 'must not contain "?" or "#"; use e.g. '
         '"https://dev.azure.com/ORG"'),
        ("https://dev.azure.com/acme#top", 'must not contain "?" or "#"; use e.g. '
         '"https://dev.azure.com/ORG"'),
        ("http://dev.azure.com/acme", "must use https:// (http:// is only allowed for a server on "
         'this machine: 127.0.0.1, ::1 or localhost); use "https://dev.azure.com/acme"'),
        ("http://127.0.0.1.example.com/x", "must use https:// (http:// is only allowed for a "
         "server on this machine: 127.0.0.1, ::1 or localhost); use "
         '"https://127.0.0.1.example.com/x"'),
        ("dev.azure.com/acme", 'must be a URL starting with https://, e.g. '
         '"https://dev.azure.com/acme"; got "dev.azure.com/acme"'),
        ("ftp://dev.azure.com/acme", 'must be a URL starting with https://, e.g. '
         '"https://dev.azure.com/ORG"; got "ftp://dev.azure.com/acme"'),
        ("https://me:secret@dev.azure.com/acme", "must not contain a user name or password; the "
         'PAT lives in the OS keyring: store it with "gpuci-tui token set"'),
        ("https://dev.azure.com/-acme", "has an invalid organisation name (letters, digits and "
         'inner hyphens, at most 50), got "-acme"'),
        ("https://dev.azure.com:99999/acme", "is not a valid URL (bad host or port), got "
         '"https://dev.azure.com:99999/acme"'),
        ("https://dev.azure.com/my org", 'must not contain spaces, got "https://dev.azure.com/my org"'),
        ("", 'is empty; set your organisation URL, e.g. "https://dev.azure.com/ORG"'),
        (7, "must be a string in quotes, got 7"),
    ],
)  # fmt: skip
def test_bad_org_urls(text: object, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_org_url(text)
    assert (info.value.key, info.value.problem) == ("azure.url", problem)
    assert str(info.value) == f"azure.url: {problem}"


def test_pool_is_trimmed_and_not_empty(tmp_path: Path) -> None:
    assert (
        load_config(write(tmp_path / "c.toml", with_value("azure", "pool", " gpu "))).azure.pool
        == "gpu"
    )
    assert problems(tmp_path, with_value("azure", "pool", "  ")) == [
        'azure.pool: is empty; set the agent pool name, e.g. "gpu"'
    ]


@pytest.mark.parametrize(
    "image",
    [
        "ubuntu",
        "ubuntu:22.04",
        "registry.example/gpu-agent:cuda12",
        "localhost:5000/team/agent:v1.2-rc_3",
        "my.registry.azurecr.io/a/b/c",
        "repo/agent@sha256:" + "a" * 64,
    ],
)
def test_valid_image_references(tmp_path: Path, image: str) -> None:
    assert (
        load_config(write(tmp_path / "c.toml", with_value("agents", "image", image))).agents.image
        == image
    )


@pytest.mark.parametrize(
    ("image", "problem"),
    [
        ("Team/Agent:v1", 'is not an image reference like "REPO/IMAGE:TAG"; repository names must '
         'be lowercase, got "Team/Agent:v1"'),
        ("gpu agent", 'is not an image reference like "REPO/IMAGE:TAG", got "gpu agent"'),
        ("repo:", 'is not an image reference like "REPO/IMAGE:TAG", got "repo:"'),
        ("", 'is empty; set the agent image, e.g. "REPO/IMAGE:TAG"'),
    ],
)  # fmt: skip
def test_bad_image_references(tmp_path: Path, image: str, problem: str) -> None:
    assert problems(tmp_path, with_value("agents", "image", image)) == [f"agents.image: {problem}"]


@pytest.mark.parametrize(
    ("prefix", "problem"),
    [
        ("-gpu", "must start with a letter or digit and hold only letters, digits, '_', '.' and "
         "'-' (it names containers and agents), got \"-gpu\""),
        ("gpu 01", "must start with a letter or digit and hold only letters, digits, '_', '.' and "
         "'-' (it names containers and agents), got \"gpu 01\""),
        ("g" * 51, "must be at most 50 characters, got 51"),
        ("", 'is empty; set a short name such as the host name, e.g. "gpu01"'),
    ],
)  # fmt: skip
def test_bad_name_prefixes(prefix: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_name_prefix(prefix)
    assert str(info.value) == f"agents.name_prefix: {problem}"


def test_valid_name_prefixes() -> None:
    assert validate_name_prefix("g" * 50) == "g" * 50
    assert validate_name_prefix("Gpu.01_a-b") == "Gpu.01_a-b"


@pytest.mark.parametrize(
    ("hostname", "prefix"),
    [("gpu-01.lab.example.com", "gpu-01"), ("my host!", "my-host"), ("__", "gpuhost"),
     ("_x_", "x"), ("h" * 70, "h" * 50)],
)  # fmt: skip
def test_default_name_prefix_is_the_sanitised_host_name(hostname: str, prefix: str) -> None:
    assert default_name_prefix(hostname) == prefix
    validate_name_prefix(default_name_prefix(hostname))


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("network", "hots", 'must be one of "bridge", "host", got "hots"; did you mean "host"?'),
        ("network", "none", 'must be one of "bridge", "host", got "none"'),
        ("gpus", "per_agent", 'must be one of "all", "none", "per-agent", got "per_agent"; did '
         'you mean "per-agent"?'),
        ("gpus", 2, 'must be one of "all", "none", "per-agent", got 2'),
        ("oom_score_adj", 1001, "must be a whole number from -1000 to 1000, got 1001"),
        ("mem_limit", "64x", 'must be a size like "64g" (unit k, m or g), got "64x"'),
        ("mem_limit", "1k", 'must be at least "6m" (Docker\'s minimum), got "1k"'),
        ("mem_limit", 64, 'must be a size like "64g" in quotes, got 64'),
        ("docker_socket", "yes", 'must be true or false, got "yes"'),
    ],
)  # fmt: skip
def test_bad_agent_values(tmp_path: Path, key: str, value: Any, problem: str) -> None:
    assert problems(tmp_path, with_value("agents", key, value)) == [f"agents.{key}: {problem}"]


def test_choice_errors_carry_the_allowed_values(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", with_value("agents", "gpus", "some"))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.allowed == ("all", "none", "per-agent")


@pytest.mark.parametrize("limit", ["64g", "512m", "1.5g", "64gb", "6m", "8589934592"])
def test_valid_memory_limits(tmp_path: Path, limit: str) -> None:
    path = write(tmp_path / "c.toml", with_value("agents", "mem_limit", limit))
    assert load_config(path).agents.mem_limit == limit


def test_per_agent_gpus_need_enough_gpus(tmp_path: Path) -> None:
    doc = with_value("agents", "gpus", "per-agent")
    doc["agents"]["count"] = 3
    assert problems(tmp_path, doc, gpu_count=2) == [
        'agents.count: is 3 with gpus = "per-agent", but this host has 2 GPUs; lower count to 2 '
        'or use gpus = "all" or "none"'
    ]
    assert problems(tmp_path, doc, gpu_count=0) == [
        'agents.count: is 3 with gpus = "per-agent", but this host has 0 GPUs; use gpus = "all" '
        'or "none"'
    ]
    path = write(tmp_path / "ok.toml", doc)
    assert load_config(path, gpu_count=3).agents.count == 3
    assert load_config(path).agents.count == 3  # unknown GPU count: not checked
    doc["agents"]["gpus"] = "all"
    assert load_config(write(tmp_path / "all.toml", doc), gpu_count=1).agents.count == 3


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


# --------------------------------------------------------------------------- supervisor and keys


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


def test_key_bindings(tmp_path: Path) -> None:
    doc = base_doc()
    doc["keys"] = {"drain": "x", "restart": "", "quit": 5}
    assert problems(tmp_path, doc) == [
        'keys.restart: is empty; give one or more keys, e.g. "x" or "ctrl+d,f5"',
        'keys.quit: must be key names such as "x" or "ctrl+d" in quotes, got 5',
    ]
    doc["keys"] = {"drain": " x ", "app.quit": "ctrl+q,f10"}
    assert load_config(write(tmp_path / "k.toml", doc)).keys == {
        "drain": "x",
        "app.quit": "ctrl+q,f10",
    }


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
    from gpuci_tui.core import agentspec

    config = full_config(tmp_path)
    assert agentspec.instance_id(config) == instance_id(config)
    assert agentspec.config_hash(config) == config_hash(config)


def test_every_agents_field_has_a_rule() -> None:
    # A new dataclass field without a rule would be silently accepted unchecked.
    fields = {f"agents.{f.name}" for f in dataclasses.fields(AgentsConfig)} - {"agents.volumes"}
    fields |= {f"azure.{f.name}" for f in dataclasses.fields(AzureConfig)}
    fields |= {f"supervisor.{f.name}" for f in dataclasses.fields(SupervisorConfig)}
    from gpuci_tui.core import config as config_module

    assert set(config_module._FIELDS) == fields
    assert config_validate.MAX_AGENTS == 64
