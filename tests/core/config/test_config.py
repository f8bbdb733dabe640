"""Configuration: loading the file and every single-value rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config.loader import (
    AzureConfig,
    ConfigError,
    ConfigErrors,
    default_name_prefix,
    load_config,
    validate_count,
    validate_name_prefix,
    validate_org_url,
)
from gpuci_tui.core.config.validate import IMAGE_EXAMPLE
from gpuci_tui.core.engine.settings import SupervisorConfig
from tests.core.config_helpers import (
    URL,
    base_doc,
    problems,
    with_value,
    write,
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
        "[groups], [supervisor], [gpu], [history], [metrics], [docker], [keys], [fleet]",
        'agents.imgae: unknown key; did you mean "image"? allowed: count, image, name_prefix, '
        "network, gpus, gpus_per_slot, volumes, oom_score_adj, mem_limit, docker_socket, standby, "
        "standby_min, standby_max, max_agents, standby_schedule, gpu_admission, gpu_hold_down, pull, "
        "pull_check_interval",
        'agents.volumes[0].contianer: unknown key; did you mean "container"? allowed: host, '
        "container, env",
        "agents.volumes[0]: is missing container",
    ]


def test_unknown_key_without_close_match_lists_the_allowed(tmp_path: Path) -> None:
    [line] = problems(tmp_path, with_value("azure", "region", "westeurope"))
    assert line == (
        "azure.region: unknown key; allowed: url, pool, remove_offline_after, auth, tenant_id, "
        "client_id, authority, client_certificate, pat_expires, max_requests_per_minute"
    )


def test_the_request_cap_is_a_whole_number_from_ten_and_a_near_miss_is_named(
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "ok.toml", with_value("azure", "max_requests_per_minute", 120))
    assert load_config(path).azure.max_requests_per_minute == 120
    [low] = problems(tmp_path, with_value("azure", "max_requests_per_minute", 5))
    assert low == "azure.max_requests_per_minute: must be a whole number from 10 to 100000, got 5"
    [typo] = problems(tmp_path, with_value("azure", "max_request_per_minute", 60))
    assert 'did you mean "max_requests_per_minute"?' in typo


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
        "azure: is missing; add an [azure] section",
        f'agents.image: is missing; add image = "{IMAGE_EXAMPLE}"',
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
        ("Team/Agent:v1", f'is not an image reference like "{IMAGE_EXAMPLE}"; repository names '
         'must be lowercase, got "Team/Agent:v1"'),
        ("gpu agent", f'is not an image reference like "{IMAGE_EXAMPLE}", got "gpu agent"'),
        ("repo:", f'is not an image reference like "{IMAGE_EXAMPLE}", got "repo:"'),
        ("", f'is empty; set the agent image, e.g. "{IMAGE_EXAMPLE}"'),
        # The wizard's placeholder, copied by hand: the example is a real image, never it.
        ("REPO/IMAGE:TAG", 'is still the placeholder "REPO/IMAGE:TAG": name your agent image, '
         f'e.g. "{IMAGE_EXAMPLE}"'),
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
        ("gpus", "per_agent", 'must be one of "all", "none", "per-agent", "mig", a list of GPU ids like ["0", "1"] or { per_agent = ["0", "1"] }, got "per_agent"; did '
         'you mean "per-agent"?'),
        ("gpus", 2, 'must be one of "all", "none", "per-agent", "mig", a list of GPU ids like ["0", "1"] or { per_agent = ["0", "1"] }, got 2'),
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
    assert info.value.allowed == ("all", "none", "per-agent", "mig")


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
