"""Configuration: the schema, loading, validation and saving of ``config.toml``.

The file format is a public contract, documented key by key in docs/configuration.md (generated from this schema).
The value rules live in `validate` (and a mount's in `volumes`), the file I/O and `ConfigError`
in `file`, the ids derived from a configuration in `identity`; this module assembles them and is
the one to import (it re-exports what callers need).
"""

from __future__ import annotations

import contextlib
import dataclasses
import tomllib
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from gpuci_tui.core.config import auth_rules
from gpuci_tui.core.config import validate as rules
from gpuci_tui.core.config.admission import parse_admission, validate_hold_down
from gpuci_tui.core.config.docker_disk import DockerConfig, check_docker_table, validate_docker
from gpuci_tui.core.config.file import (
    ConfigError,
    ConfigErrors,
    config_to_toml,
    gpus_to_toml,
    raise_if_any,
    read_toml,
    show,
    write_config_text,
)
from gpuci_tui.core.config.fleet import FleetConfig, check_fleet_table
from gpuci_tui.core.config.groups import check_per_slot, parse_gpus, parse_groups
from gpuci_tui.core.config.identity import config_hash, daemon_instance, instance_id
from gpuci_tui.core.config.keys import check_keys_table
from gpuci_tui.core.config.model import (
    DEFAULT_GROUP,
    AgentGroup,
    AgentsConfig,
    AzureConfig,
    Config,
    VolumeConfig,
    agent_groups,
    for_group,
)
from gpuci_tui.core.config.observe import (
    GpuConfig,
    HistoryConfig,
    MetricsConfig,
    check_metrics_remote,
    validate_gpu,
    validate_history,
    validate_metrics,
)
from gpuci_tui.core.config.pull import validate_pull, validate_pull_check_interval
from gpuci_tui.core.config.schedule import (
    check_schedule_limit,
    check_standby_bounds,
    parse_schedule,
)
from gpuci_tui.core.config.validate import (
    GPU_POLICIES,
    IMAGE_EXAMPLE,
    NETWORK_MODES,
    default_name_prefix,
    validate_count,
    validate_name_prefix,
    validate_org_url,
)
from gpuci_tui.core.config.volumes import host_paths_elsewhere, validate_volume
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.wording import indefinite, plural

# Re-exported so that callers need only this module; the wizard may use any
# other `validate.validate_*` for a single field.
__all__ = [
    "DEFAULT_GROUP", "AgentGroup", "agent_groups", "for_group",
    "GPU_POLICIES", "NETWORK_MODES", "AgentsConfig", "AzureConfig", "Config", "ConfigError",
    "ConfigErrors", "GpuConfig", "HistoryConfig", "MetricsConfig", "VolumeConfig", "config_hash", "config_to_toml",
    "daemon_instance", "default_name_prefix", "instance_id", "load_config", "parse_config", "save_config",
    "validate_config",
    "validate_count", "validate_name_prefix", "validate_org_url", "validate_volume",
]  # fmt: skip


# --------------------------------------------------------------------------- the whole file

_SECTIONS = (
    "azure", "agents", "groups", "supervisor", "gpu", "history", "metrics", "docker", "keys",
    "fleet",
)  # fmt: skip
_TABLES: dict[str, tuple[str, ...]] = {
    "azure": tuple(f.name for f in dataclasses.fields(AzureConfig)),
    # gpu_ids is written as part of gpus (a list, or { per_agent = [...] }).
    "agents": tuple(f.name for f in dataclasses.fields(AgentsConfig) if f.name != "gpu_ids"),
    "supervisor": tuple(f.name for f in dataclasses.fields(SupervisorConfig)),
    "gpu": tuple(f.name for f in dataclasses.fields(GpuConfig)),
    "history": tuple(f.name for f in dataclasses.fields(HistoryConfig)),
    "metrics": tuple(f.name for f in dataclasses.fields(MetricsConfig)),
    "docker": tuple(f.name for f in dataclasses.fields(DockerConfig)),
}
_DEFAULTS: dict[str, dict[str, Any]] = {
    "agents": {"gpus": AgentsConfig.gpus},
    "supervisor": dataclasses.asdict(SupervisorConfig()),
}
_VOLUME_KEYS = tuple(f.name for f in dataclasses.fields(VolumeConfig))
_FIELDS: dict[str, Callable[[object], object]] = {
    "azure.url": validate_org_url,
    "azure.pool": rules.validate_pool,
    "azure.remove_offline_after": rules.validate_remove_offline_after,
    "azure.max_requests_per_minute": rules.validate_max_requests_per_minute,
    "azure.auth": auth_rules.validate_auth,
    "azure.tenant_id": auth_rules.validate_tenant_id,
    "azure.client_id": auth_rules.validate_client_id,
    "azure.authority": auth_rules.validate_authority,
    "azure.client_certificate": auth_rules.validate_client_certificate,
    "azure.pat_expires": auth_rules.validate_pat_expires,
    "agents.count": validate_count,
    "agents.image": rules.validate_image,
    "agents.name_prefix": validate_name_prefix,
    "agents.network": rules.validate_network,
    "agents.gpus": partial(parse_gpus, key="agents.gpus"),
    "agents.gpus_per_slot": rules.validate_gpus_per_slot,
    "agents.oom_score_adj": rules.validate_oom_score_adj,
    "agents.mem_limit": rules.validate_mem_limit,
    "agents.docker_socket": rules.validate_docker_socket,
    "agents.standby": rules.validate_standby,
    "agents.standby_min": partial(rules.validate_standby_bound, "standby_min"),
    "agents.standby_max": partial(rules.validate_standby_bound, "standby_max"),
    "agents.max_agents": rules.validate_max_agents,
    "agents.standby_schedule": parse_schedule,
    "agents.gpu_admission": parse_admission,
    "agents.gpu_hold_down": validate_hold_down,
    "agents.pull": validate_pull,
    "agents.pull_check_interval": validate_pull_check_interval,
    **{
        f"supervisor.{name}": partial(rules.validate_supervisor, name)
        for name in _TABLES["supervisor"]
    },
    **{f"gpu.{name}": partial(validate_gpu, name) for name in _TABLES["gpu"]},
    **{f"history.{name}": partial(validate_history, name) for name in _TABLES["history"]},
    **{f"metrics.{name}": partial(validate_metrics, name) for name in _TABLES["metrics"]},
    **{f"docker.{name}": partial(validate_docker, name) for name in _TABLES["docker"]},
}
_REQUIRED = {
    "azure.url": '"https://dev.azure.com/ORG"',
    "azure.pool": '"gpu"',
    "agents.count": "2",
    "agents.image": f'"{IMAGE_EXAMPLE}"',
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
        elif (
            table is None
            and name in ("azure", "agents")
            and not (name == "agents" and "groups" in tables)
        ):
            errors.append(
                ConfigError(f"is missing; add {indefinite(f'[{name}]')} section", key=name)
            )
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
            # With [groups.NAME] tables, [agents] holds defaults: a group may give these.
            if dotted in _REQUIRED and not (section == "agents" and "groups" in tables):
                errors.append(
                    ConfigError(f"is missing; add {name} = {_REQUIRED[dotted]}", key=dotted)
                )
            continue
        try:
            values[section][name] = check(table[name])
        except ConfigError as exc:
            errors.extend(exc.errors)
    agents = sections["agents"] or {}
    if "gpus" in values["agents"]:
        values["agents"]["gpus"], values["agents"]["gpu_ids"] = values["agents"]["gpus"]
    values["agents"].setdefault("name_prefix", default_name_prefix())
    values["agents"]["volumes"] = _volumes(agents.get("volumes", ()), errors)
    groups = []
    if sections["groups"] is not None:
        groups = parse_groups(
            sections["groups"],
            defaults=values["agents"],
            default_pool=values["azure"].get("pool", ""),
            base_prefix=values["agents"]["name_prefix"],
            checks={
                k: v
                for k, v in _FIELDS.items()
                if k.startswith("agents.") and k not in ("agents.gpus", "agents.volumes")
            },
            volumes=_volumes,
            errors=errors,
        )
    values["keys"], key_errors = check_keys_table(sections["keys"] or {})
    errors.extend(key_errors)
    fleet: FleetConfig | None = FleetConfig()
    if sections["fleet"] is not None:
        fleet, fleet_errors = check_fleet_table(sections["fleet"])
        errors.extend(fleet_errors)
    errors.extend(_cross_checks(values, sections, gpu_count))
    errors.sort(key=_section_order)  # stable: within a section, the order they were found
    if errors:  # a missing section or required key is an error too, so all are set here
        return None, errors
    agents_values = dict(values["agents"])
    if groups:  # [agents] is then only the groups' defaults
        agents_values.setdefault("count", groups[0][2]["count"])
        agents_values.setdefault("image", groups[0][2]["image"])
    config = Config(
        azure=AzureConfig(**values["azure"]),
        agents=AgentsConfig(**agents_values),
        groups=tuple(
            AgentGroup(name, pool, AgentsConfig(**group_values))
            for name, pool, group_values in groups
        ),
        supervisor=SupervisorConfig(**values["supervisor"]),
        keys=values["keys"],
        gpu=GpuConfig(**values["gpu"]),
        history=HistoryConfig(**values["history"]),
        metrics=MetricsConfig(**values["metrics"]),
        docker=DockerConfig(**values["docker"]),
        fleet=fleet or FleetConfig(),
    )
    return config, errors


def _section_order(error: ConfigError) -> int:
    top = (error.key or "").split(".")[0]
    return _SECTIONS.index(top) if top in _SECTIONS else -1


def _volumes(
    raw: object, errors: list[ConfigError], where: str = "agents.volumes"
) -> tuple[VolumeConfig, ...]:
    if not isinstance(raw, list | tuple):
        problem = f"must be a list of [[{where}]] tables, got {show(raw)}"
        errors.append(ConfigError(problem, key=where))
        return ()
    accepted: list[VolumeConfig] = []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
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
            errors.extend(
                ConfigError(
                    e.problem,
                    key=(e.key or "").replace("agents.volumes", where, 1),
                    allowed=e.allowed,
                )  # fmt: skip
                for e in exc.errors
            )
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

    errors = auth_rules.check_auth_table(values["azure"], sections["azure"] or {})
    sup = settled("supervisor", "backoff_base", "backoff_max")
    if sup and sup["backoff_max"] < sup["backoff_base"]:
        got = f"must be at least backoff_base ({sup['backoff_base']:g}), got {sup['backoff_max']:g}"
        errors.append(ConfigError(got, key="supervisor.backoff_max"))
    agents = settled("agents", "count", "gpus")
    per_slot = values["agents"].get("gpus_per_slot", 1)
    if agents and agents["count"] is not None and not values["agents"].get("gpu_ids"):
        try:
            rules.check_gpu_count(agents["count"], agents["gpus"], gpu_count, per_slot)
        except ConfigError as exc:
            errors.append(exc)
    ids = values["agents"].get("gpu_ids", ())
    count = values["agents"].get("count")
    if (
        values["agents"].get("gpus") == "per-agent"
        and ids
        and count
        and len(ids) < count * per_slot
    ):
        problem = f"is {count}, but gpus per_agent lists {plural(len(ids), 'GPU')} " + (
            f"({per_slot} per slot)" if per_slot > 1 else "(one per slot)"
        )
        errors.append(ConfigError(problem, key="agents.count"))
    errors.extend(check_per_slot("agents", values["agents"].get("gpus", "all"), per_slot))
    errors.extend(check_schedule_limit("agents", values["agents"]))
    if settled("agents", "standby", "standby_min", "standby_max") is not None:
        errors.extend(check_standby_bounds("agents", values["agents"]))
    errors.extend(check_metrics_remote(sections["metrics"] or {}, values["metrics"]))
    if not any(
        name in (sections["docker"] or {}) and name not in values["docker"]
        for name in ("min_free", "hard_floor")
    ):
        errors.extend(check_docker_table(dict(values["docker"])))
    return errors


def _tables_of(config: Config) -> dict[str, Any]:
    """A `Config` as the tables `_from_tables` reads (volumes stay dataclasses)."""
    tables: dict[str, Any] = {
        "azure": dataclasses.asdict(config.azure),
        "agents": _agents_table(config.agents),
        "supervisor": dataclasses.asdict(config.supervisor),
        "gpu": dataclasses.asdict(config.gpu),
        "history": dataclasses.asdict(config.history),
        "metrics": dataclasses.asdict(config.metrics),
        "docker": {k: v for k, v in dataclasses.asdict(config.docker).items() if v is not None},
        "keys": dict(config.keys),
        "fleet": config.fleet.to_table(),
    }
    if config.groups:
        tables["groups"] = {
            group.name: {**_agents_table(group.agents), "pool": group.pool}
            for group in config.groups
        }
    return tables


def _agents_table(agents: AgentsConfig) -> dict[str, Any]:
    table = {f.name: getattr(agents, f.name) for f in dataclasses.fields(agents)}
    table["gpus"] = gpus_to_toml(table["gpus"], table.pop("gpu_ids"))
    table["gpu_admission"] = agents.gpu_admission.to_toml()
    return table


def validate_config(config: Config, *, gpu_count: int | None = None) -> list[ConfigError]:
    """Every problem of a `Config` built in memory, by the same rules as the file.

    Args:
        config: The configuration to check (e.g. the wizard's draft).
        gpu_count: The number of host GPUs when known (checks ``gpus = "per-agent"``).

    Returns:
        The problems found; empty when the configuration is valid.
    """
    return _from_tables(_tables_of(config), gpu_count=gpu_count)[1]


def load_config(
    path: Path, *, gpu_count: int | None = None, host_paths_here: bool = True
) -> Config:
    """Read, check and normalise a configuration file.

    Args:
        path: The TOML file.
        gpu_count: The number of host GPUs when known (checks ``gpus = "per-agent"``).
        host_paths_here: Volume host paths must exist on this machine (False for
            ``export kubernetes``, whose paths are on the cluster's nodes).

    Returns:
        The configuration, with ``path`` set and ``name_prefix`` defaulted to the host name.

    Raises:
        ConfigError: the file is missing, unreadable or not TOML, or has one problem.
        ConfigErrors: the file has several problems (all of them are listed).
    """
    with contextlib.nullcontext() if host_paths_here else host_paths_elsewhere():
        config, errors = _from_tables(read_toml(path), gpu_count=gpu_count)
    raise_if_any(errors, path)
    assert config is not None  # noqa: S101 - no errors means it was built
    return dataclasses.replace(config, path=path)


def parse_config(text: str, path: Path | None = None) -> Config:
    """A configuration from TOML text (what a daemon says it runs on), by the file's rules.

    Raises:
        ConfigError: the text is not TOML, or breaks a rule (`ConfigErrors` for several).
    """
    try:
        tables = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML ({exc})", path=path) from None
    config, errors = _from_tables(tables)
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
