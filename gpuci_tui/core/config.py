"""Configuration: the schema, loading, validation and saving of ``config.toml``.

The file format is a public contract, documented in README.md ("Configuration").
The value rules live in `config_validate`, the file I/O and `ConfigError` in `config_file`; this
module assembles them and is the one to import (it re-exports what callers need).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from gpuci_tui.core import config_validate as rules
from gpuci_tui.core.config_file import (
    ConfigError,
    ConfigErrors,
    config_to_toml,
    raise_if_any,
    read_toml,
    show,
    write_config_text,
)
from gpuci_tui.core.config_validate import (
    GPU_POLICIES,
    NETWORK_MODES,
    check_volume,
    default_name_prefix,
    validate_count,
    validate_name_prefix,
    validate_org_url,
)

# Re-exported so that callers need only this module; the wizard may use any
# other `config_validate.validate_*` for a single field.
__all__ = [
    "GPU_POLICIES", "NETWORK_MODES", "AgentsConfig", "AzureConfig", "Config", "ConfigError",
    "ConfigErrors", "SupervisorConfig", "VolumeConfig", "config_hash", "config_to_toml",
    "default_name_prefix", "instance_id", "load_config", "save_config", "validate_config",
    "validate_count", "validate_name_prefix", "validate_org_url", "validate_volume",
]  # fmt: skip


@dataclass(frozen=True)
class VolumeConfig:
    """A read-only dataset mount (``[[agents.volumes]]``)."""

    host: str
    """Absolute host directory."""
    container: str
    """Absolute path inside the agent container."""
    env: str | None = None
    """Env var inside the agent that names ``container``."""


@dataclass(frozen=True)
class AzureConfig:
    """``[azure]``."""

    url: str
    """Organisation URL, e.g. ``https://dev.azure.com/ORG``."""
    pool: str
    """Agent pool name."""


@dataclass(frozen=True)
class AgentsConfig:
    """``[agents]``."""

    count: int
    image: str
    name_prefix: str
    """Agent and container names are ``{name_prefix}-{slot}``; default: host name."""
    network: str = "bridge"
    gpus: str = "all"
    """``all`` | ``none`` | ``per-agent`` (slot i gets GPU i)."""
    volumes: tuple[VolumeConfig, ...] = ()
    oom_score_adj: int = 1000
    """Makes the kernel kill the job, not the host's own services, under memory pressure."""
    mem_limit: str | None = None
    """Optional Docker memory limit per agent, e.g. ``"64g"``."""
    docker_socket: bool = False
    """Opt-in: mount /var/run/docker.sock for container jobs (root-equivalent on the host)."""


@dataclass(frozen=True)
class SupervisorConfig:
    """``[supervisor]`` (optional; the defaults suit most hosts)."""

    poll_interval: float = 10.0
    """Seconds between agent-list calls to Azure DevOps (one call per cycle, never per slot)."""
    backoff_base: float = 2.0
    """First delay after an early failure; doubles per consecutive failure."""
    backoff_max: float = 60.0
    park_after: int = 5
    """Consecutive early failures after which a slot is parked."""
    healthy_after: float = 30.0
    """A container that lived this long (or took a job) did not fail early."""
    stop_timeout: float = 30.0
    """Seconds between SIGTERM and SIGKILL when stopping an idle agent."""


@dataclass(frozen=True)
class Config:
    """The whole configuration file."""

    azure: AzureConfig
    agents: AgentsConfig
    supervisor: SupervisorConfig = field(default_factory=SupervisorConfig)
    keys: dict[str, str] = field(default_factory=dict)
    """``[keys]``: binding id -> key(s), e.g. ``drain = "x"``."""
    path: Path | None = None
    """The file this was loaded from (not written to the file)."""


# --------------------------------------------------------------------------- volumes


def validate_volume(
    host: object,
    container: object,
    env: object = None,
    existing: Sequence[VolumeConfig] = (),
    *,
    index: int | None = None,
) -> VolumeConfig:
    """Check one read-only dataset mount; the rules are those of `config_validate.check_volume`.

    Returns:
        The mount with normalised paths; ``env`` is None when empty.

    Raises:
        ConfigError: one problem, or `ConfigErrors` when several fields are wrong.
    """
    host_path, container_path, env_name = check_volume(host, container, env, existing, index=index)
    return VolumeConfig(host=host_path, container=container_path, env=env_name)


# --------------------------------------------------------------------------- the whole file

_SECTIONS = ("azure", "agents", "supervisor", "keys")
_TABLES: dict[str, tuple[str, ...]] = {
    "azure": tuple(f.name for f in dataclasses.fields(AzureConfig)),
    "agents": tuple(f.name for f in dataclasses.fields(AgentsConfig)),
    "supervisor": tuple(f.name for f in dataclasses.fields(SupervisorConfig)),
}
_DEFAULTS: dict[str, dict[str, Any]] = {
    "agents": {"gpus": AgentsConfig.gpus},
    "supervisor": dataclasses.asdict(SupervisorConfig()),
}
_VOLUME_KEYS = tuple(f.name for f in dataclasses.fields(VolumeConfig))
_FIELDS: dict[str, Callable[[object], object]] = {
    "azure.url": validate_org_url,
    "azure.pool": rules.validate_pool,
    "agents.count": validate_count,
    "agents.image": rules.validate_image,
    "agents.name_prefix": validate_name_prefix,
    "agents.network": rules.validate_network,
    "agents.gpus": rules.validate_gpus,
    "agents.oom_score_adj": rules.validate_oom_score_adj,
    "agents.mem_limit": rules.validate_mem_limit,
    "agents.docker_socket": rules.validate_docker_socket,
    **{
        f"supervisor.{name}": partial(rules.validate_supervisor, name)
        for name in _TABLES["supervisor"]
    },
}
_REQUIRED = {
    "azure.url": '"https://dev.azure.com/ORG"',
    "azure.pool": '"gpu"',
    "agents.count": "2",
    "agents.image": '"REPO/IMAGE:TAG"',
}


def _from_tables(
    tables: Mapping[str, Any], *, gpu_count: int | None = None
) -> tuple[Config | None, list[ConfigError]]:
    """Check a whole configuration given as tables; build it when there is no problem.

    ``tables`` is the parsed TOML document, or a `Config` taken apart by
    `_tables_of`, so files and in-memory configs follow the same rules.
    """
    errors = rules.check_keys(tables, "", _SECTIONS)
    sections: dict[str, Mapping[str, Any] | None] = {}
    for name in _SECTIONS:
        table = tables.get(name)
        if table is not None and not isinstance(table, Mapping):
            errors.append(ConfigError(f"must be a table ([{name}]), got {show(table)}", key=name))
            table = {}
        elif table is None and name in ("azure", "agents"):
            errors.append(ConfigError(f"is missing; add a [{name}] section", key=name))
        elif table is not None and name in _TABLES:
            errors.extend(rules.check_keys(table, name, _TABLES[name]))
        sections[name] = table
    values: dict[str, dict[str, Any]] = {name: {} for name in _SECTIONS}
    for dotted, check in _FIELDS.items():
        section, name = dotted.split(".")
        table = sections[section]
        if table is None:
            continue
        if name not in table:
            if dotted in _REQUIRED:
                errors.append(
                    ConfigError(f"is missing; add {name} = {_REQUIRED[dotted]}", key=dotted)
                )
            continue
        try:
            values[section][name] = check(table[name])
        except ConfigError as exc:
            errors.extend(exc.errors)
    agents = sections["agents"] or {}
    values["agents"].setdefault("name_prefix", default_name_prefix())
    values["agents"]["volumes"] = _volumes(agents.get("volumes", ()), errors)
    for binding, value in (sections["keys"] or {}).items():
        try:
            values["keys"][binding] = rules.validate_key_binding(binding, value)
        except ConfigError as exc:
            errors.append(exc)
    errors.extend(_cross_checks(values, sections, gpu_count))
    errors.sort(key=_section_order)  # stable: within a section, the order they were found
    if errors:  # a missing section or required key is an error too, so all are set here
        return None, errors
    config = Config(
        azure=AzureConfig(**values["azure"]),
        agents=AgentsConfig(**values["agents"]),
        supervisor=SupervisorConfig(**values["supervisor"]),
        keys=values["keys"],
    )
    return config, errors


def _section_order(error: ConfigError) -> int:
    top = (error.key or "").split(".")[0]
    return _SECTIONS.index(top) if top in _SECTIONS else -1


def _volumes(raw: object, errors: list[ConfigError]) -> tuple[VolumeConfig, ...]:
    if not isinstance(raw, list | tuple):
        problem = f"must be a list of [[agents.volumes]] tables, got {show(raw)}"
        errors.append(ConfigError(problem, key="agents.volumes"))
        return ()
    accepted: list[VolumeConfig] = []
    for i, item in enumerate(raw):
        at = f"agents.volumes[{i}]"
        if isinstance(item, VolumeConfig):
            item = dataclasses.asdict(item)
        if not isinstance(item, Mapping):
            problem = f"must be a table with host and container, got {show(item)}"
            errors.append(ConfigError(problem, key=at))
            continue
        errors.extend(rules.check_keys(item, at, _VOLUME_KEYS))
        missing = [name for name in ("host", "container") if name not in item]
        if missing:
            errors.append(ConfigError(f"is missing {' and '.join(missing)}", key=at))
            continue
        try:
            host, container, env = item["host"], item["container"], item.get("env")
            accepted.append(validate_volume(host, container, env, accepted, index=i))
        except ConfigError as exc:
            errors.extend(exc.errors)
    return tuple(accepted)


def _cross_checks(
    values: Mapping[str, Mapping[str, Any]],
    sections: Mapping[str, Mapping[str, Any] | None],
    gpu_count: int | None,
) -> list[ConfigError]:
    """Rules between two values, checked when both are valid (or absent: the default)."""

    def settled(section: str, *names: str) -> dict[str, Any] | None:
        table, got = sections[section] or {}, values[section]
        if any(name in table and name not in got for name in names):
            return None  # one of them is wrong, and that error is already reported
        defaults = _DEFAULTS[section]
        return {name: got[name] if name in got else defaults.get(name) for name in names}

    errors = []
    sup = settled("supervisor", "backoff_base", "backoff_max")
    if sup and sup["backoff_max"] < sup["backoff_base"]:
        got = f"must be at least backoff_base ({sup['backoff_base']:g}), got {sup['backoff_max']:g}"
        errors.append(ConfigError(got, key="supervisor.backoff_max"))
    agents = settled("agents", "count", "gpus")
    if agents and agents["count"] is not None:
        try:
            rules.check_gpu_count(agents["count"], agents["gpus"], gpu_count)
        except ConfigError as exc:
            errors.append(exc)
    return errors


def _tables_of(config: Config) -> dict[str, Any]:
    """A `Config` as the tables `_from_tables` reads (volumes stay dataclasses)."""
    agents = {f.name: getattr(config.agents, f.name) for f in dataclasses.fields(config.agents)}
    return {
        "azure": dataclasses.asdict(config.azure),
        "agents": agents,
        "supervisor": dataclasses.asdict(config.supervisor),
        "keys": dict(config.keys),
    }


def validate_config(config: Config, *, gpu_count: int | None = None) -> list[ConfigError]:
    """Every problem of a `Config` built in memory, by the same rules as the file.

    Args:
        config: The configuration to check (e.g. the wizard's draft).
        gpu_count: The number of host GPUs when known (checks ``gpus = "per-agent"``).

    Returns:
        The problems found; empty when the configuration is valid.
    """
    return _from_tables(_tables_of(config), gpu_count=gpu_count)[1]


def load_config(path: Path, *, gpu_count: int | None = None) -> Config:
    """Read, check and normalise a configuration file.

    Args:
        path: The TOML file.
        gpu_count: The number of host GPUs when known (checks ``gpus = "per-agent"``).

    Returns:
        The configuration, with ``path`` set and ``name_prefix`` defaulted to the host name.

    Raises:
        ConfigError: the file is missing, unreadable or not TOML, or has one problem.
        ConfigErrors: the file has several problems (all of them are listed).
    """
    config, errors = _from_tables(read_toml(path), gpu_count=gpu_count)
    raise_if_any(errors, path)
    assert config is not None  # noqa: S101 - no errors means it was built
    return dataclasses.replace(config, path=path)


def save_config(config: Config, path: Path, *, overwrite_broken: bool = False) -> None:
    """Check, normalise and write a configuration atomically (mode 0600, directory 0700).

    The previous good file is kept as ``config.toml.bak``. ``config.path`` is
    not written. ``load_config(path)`` afterwards returns an equal configuration.

    Args:
        config: The configuration to write.
        path: The file to write.
        overwrite_broken: Replace an existing file that is not valid TOML (it is
            kept as ``config.toml.broken``); otherwise such a file is left alone.

    Raises:
        ConfigError: the configuration is invalid (`ConfigErrors` for several
            problems), the directory cannot be written, or the existing file is broken.
    """
    normalised, errors = _from_tables(_tables_of(config))
    raise_if_any(errors)
    assert normalised is not None  # noqa: S101 - no errors means it was built
    write_config_text(path, config_to_toml(normalised), overwrite_broken=overwrite_broken)


# --------------------------------------------------------------------------- identity


def instance_id(config: Config) -> str:
    """12 hex digits naming the agent set a supervisor manages (org, pool, name prefix).

    Used in container labels, the lock file and the control socket name, so it
    must stay stable across releases for the same three values.
    """
    key = "\n".join((_org_key(config.azure.url), config.azure.pool, config.agents.name_prefix))
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def config_hash(config: Config) -> str:
    """12 hex digits of everything that shapes an agent container.

    Stored as a container label, so a supervisor notices containers started
    under an older configuration. Slot count and supervisor timing are left out:
    changing them needs no new containers.
    """
    agents = config.agents
    relevant = {
        "url": config.azure.url,
        "pool": config.azure.pool,
        "image": agents.image,
        "network": agents.network,
        "gpus": agents.gpus,
        "volumes": [[v.host, v.container, v.env] for v in agents.volumes],
        "oom": agents.oom_score_adj,
        "mem": agents.mem_limit,
        "sock": agents.docker_socket,
    }
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()[:12]


def _org_key(url: str) -> str:
    # Organisation names are case-insensitive, and the id must not depend on spelling.
    return url.rstrip("/").lower()
