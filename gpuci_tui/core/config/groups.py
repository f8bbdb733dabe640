"""Agent groups in the configuration: ``[groups.NAME]`` tables and which GPUs each may use.

A group is a set of identical agents for one pool. ``[agents]`` alone is one
group; with ``[groups.NAME]`` tables, ``[agents]`` holds the defaults every
group starts from, and each group says what differs::

    [agents]                       # defaults
    image = "REPO/agent:cuda12"
    gpus = "per-agent"

    [groups.cuda12]
    count = 2
    gpus = ["0", "1"]              # every agent of the group gets GPUs 0 and 1

    [groups.cuda13]
    pool = "gpu-cuda13"            # default: [azure] pool
    count = 2
    image = "REPO/agent:cuda13"
    gpus = { per_agent = ["2", "3"] }   # slot i gets the i-th GPU of the list

The rules between groups: no two groups share a GPU or a name prefix. GPUs
are named by NVML index (``"0"``) or UUID (``"GPU-…"``/``"MIG-…"``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpuci_tui.core.config.file import ConfigError, show
from gpuci_tui.core.config.schedule import check_schedule_limit, check_standby_bounds
from gpuci_tui.core.config.validate import (
    GPU_POLICIES,
    IMAGE_EXAMPLE,
    check_keys,
    suggest,
    validate_pool,
)
from gpuci_tui.core.wording import plural

GROUP_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,19}")
_GPU_ID = re.compile(r"\d{1,3}|(?:GPU|MIG)-[0-9A-Za-z-]{8,}")
GPUS_FORMS = (
    'one of "all", "none", "per-agent", "mig", a list of GPU ids like ["0", "1"] '
    'or { per_agent = ["0", "1"] }'
)

Check = Callable[[object], object]


def parse_gpus(value: object, key: str) -> tuple[str, tuple[str, ...]]:
    """The GPU setting as (policy, ids): ``all``/``none``/``per-agent`` or a list form.

    Raises:
        ConfigError: not one of `GPUS_FORMS`, or a bad/duplicate GPU id.
    """
    if isinstance(value, str):
        if value in GPU_POLICIES:
            return value, ()
        hint = suggest(value, GPU_POLICIES).strip()
        problem = f"must be {GPUS_FORMS}, got {show(value)}" + (f"; {hint}" if hint else "")
        raise ConfigError(problem, key=key, allowed=GPU_POLICIES)
    if isinstance(value, Mapping):
        unknown = [k for k in value if k != "per_agent"]
        if unknown or "per_agent" not in value:
            problem = f'as a table must be {{ per_agent = ["0", "1"] }}, got {show(dict(value))}'
            raise ConfigError(problem, key=key)
        return "per-agent", _gpu_ids(value["per_agent"], f"{key}.per_agent")
    if isinstance(value, list | tuple):
        return "list", _gpu_ids(value, key)
    raise ConfigError(f"must be {GPUS_FORMS}, got {show(value)}", key=key)


def _gpu_ids(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not value:
        raise ConfigError(f'must be a non-empty list of GPU ids like ["0", "1"], got {show(value)}',
                          key=key)  # fmt: skip
    ids: list[str] = []
    for item in value:
        text = (
            str(item).strip() if isinstance(item, int | str) and not isinstance(item, bool) else ""
        )
        if not _GPU_ID.fullmatch(text):
            problem = f'holds {show(item)}: a GPU is an NVML index ("0") or UUID ("GPU-…")'
            raise ConfigError(problem, key=key)
        if text in ids:
            raise ConfigError(f"names GPU {text} twice", key=key)
        ids.append(text)
    return tuple(ids)


def gpus_of(policy: str, ids: Sequence[str], count: int, per_slot: int = 1) -> set[str] | None:
    """The GPUs a group of ``count`` agents uses; None for "every GPU of the host".

    ``mig`` is the pseudo-GPU ``mig`` (the MIG devices of every GPU in MIG mode).
    """
    if policy == "all":
        return None
    if policy == "none":
        return set()
    if policy == "list":
        return set(ids)
    if policy == "mig":
        return {"mig"}
    need = count * per_slot
    return set(ids[:need]) if ids else {str(i) for i in range(need)}


def check_per_slot(where: str, policy: str, per_slot: int) -> list[ConfigError]:
    """``gpus_per_slot`` above 1 only shapes ``gpus = "per-agent"`` slots."""
    if per_slot == 1 or policy == "per-agent":
        return []
    problem = (
        f'is {per_slot}, but gpus = "{policy}": gpus_per_slot applies to gpus = "per-agent" '
        "or { per_agent = [...] } only"
    )
    return [ConfigError(problem, key=f"{where}.gpus_per_slot")]


def parse_groups(
    raw: object,
    *,
    defaults: Mapping[str, Any],
    default_pool: str,
    base_prefix: str,
    checks: Mapping[str, Check],
    volumes: Callable[[object, list[ConfigError], str], tuple[Any, ...]],
    errors: list[ConfigError],
) -> list[tuple[str, str, dict[str, Any]]]:
    """Check every ``[groups.NAME]`` table; return (name, pool, agents values) per good group.

    Args:
        raw: The ``groups`` table as read.
        defaults: The checked ``[agents]`` values every group starts from.
        default_pool: ``[azure] pool``.
        base_prefix: The ``[agents]`` name prefix; a group's default is ``{base}-{name}``.
        checks: The ``agents.*`` value rules, by dotted key.
        volumes: Checks a volumes list given the key prefix.
        errors: Where problems are added.
    """
    if not isinstance(raw, Mapping) or not raw:
        errors.append(ConfigError(f"must hold [groups.NAME] tables, got {show(raw)}", key="groups"))
        return []
    allowed = (*(k.split(".", 1)[1] for k in checks), "gpus", "volumes", "pool")
    groups: list[tuple[str, str, dict[str, Any]]] = []
    for name, table in raw.items():
        where = f"groups.{name}"
        if not GROUP_NAME.fullmatch(str(name)):
            problem = (
                "is not a group name: lowercase letters, digits, '-' and '_', at most 20, "
                f"starting with a letter or digit, got {show(name)}"
            )
            errors.append(ConfigError(problem, key=where))
            continue
        if not isinstance(table, Mapping):
            errors.append(ConfigError(f"must be a table ([{where}]), got {show(table)}", key=where))
            continue
        found = len(errors)
        errors.extend(check_keys(table, where, allowed))
        # Every default but the name prefix: each group's agents need names of their own.
        values = {k: v for k, v in defaults.items() if k != "name_prefix"}
        pool = default_pool
        for key, value in table.items():
            try:
                if key == "pool":
                    pool = validate_pool(value)
                elif key == "volumes":
                    values["volumes"] = volumes(value, errors, f"{where}.volumes")
                elif key == "gpus":
                    values["gpus"], values["gpu_ids"] = parse_gpus(value, f"{where}.gpus")
                elif f"agents.{key}" in checks:
                    values[key] = checks[f"agents.{key}"](value)
            except ConfigError as exc:
                errors.extend(_rekey(e, where) for e in exc.errors)
        for required, example in (("count", "2"), ("image", f'"{IMAGE_EXAMPLE}"')):
            if required not in values:
                problem = f"is missing; add {required} = {example} here or in [agents]"
                errors.append(ConfigError(problem, key=f"{where}.{required}"))
        values.setdefault("name_prefix", f"{base_prefix}-{name}")
        if len(errors) == found:
            groups.append((str(name), pool, values))
    errors.extend(check_between_groups(groups))
    return groups


def _rekey(error: ConfigError, where: str) -> ConfigError:
    key = error.key or ""
    if key.startswith(f"{where}."):
        return error
    key = f"{where}.{key.split('.', 1)[1]}" if key.startswith("agents.") else f"{where}.{key}"
    return ConfigError(error.problem, key=key, path=error.path, allowed=error.allowed)


def check_between_groups(groups: Sequence[tuple[str, str, Mapping[str, Any]]]) -> list[ConfigError]:
    """No two groups share a name prefix or a GPU; a per-agent list covers every slot."""
    errors: list[ConfigError] = []
    prefixes: dict[str, str] = {}
    taken: dict[str, str] = {}
    everything: str | None = None
    for name, _pool, values in groups:
        key = f"groups.{name}"
        prefix = values["name_prefix"]
        if prefix in prefixes:
            problem = f'is "{prefix}", the name prefix of group {prefixes[prefix]} too; give each group its own'
            errors.append(ConfigError(problem, key=f"{key}.name_prefix"))
        prefixes.setdefault(prefix, name)
        policy, ids, count = values.get("gpus", "all"), values.get("gpu_ids", ()), values["count"]
        per_slot = values.get("gpus_per_slot", 1)
        if policy == "per-agent" and ids and len(ids) < count * per_slot:
            problem = f"is {count}, but gpus per_agent lists {plural(len(ids), 'GPU')} " + (
                f"({per_slot} per slot)" if per_slot > 1 else "(one per slot)"
            )
            errors.append(ConfigError(problem, key=f"{key}.count"))
        errors.extend(check_per_slot(key, policy, per_slot))
        errors.extend(check_schedule_limit(key, values))
        errors.extend(check_standby_bounds(key, values))
        if policy == "per-agent" and per_slot > 1 and not ids and len(groups) > 1:
            # The planner picks among every GPU of the host: other groups' too.
            problem = (
                f"is {per_slot} without a GPU list, but other groups have GPUs: "
                'name this group\'s GPUs with gpus = { per_agent = ["0", "1", ...] }'
            )
            errors.append(ConfigError(problem, key=f"{key}.gpus_per_slot"))
        used = gpus_of(policy, ids, count, per_slot)
        if used is None:
            if taken or everything:
                other = everything or next(iter(taken.values()))
                problem = f'is "all", but group {other} has GPUs too: name this group\'s GPUs'
                errors.append(ConfigError(problem, key=f"{key}.gpus"))
            everything = everything or name
            continue
        if used and everything:
            problem = f'shares GPUs with group {everything}, which has gpus = "all"'
            errors.append(ConfigError(problem, key=f"{key}.gpus"))
        for gpu in sorted(used):
            if gpu in taken:
                problem = (
                    f"gives GPU {gpu} to this group and to group {taken[gpu]}; a GPU belongs to one group"
                    if gpu != "mig"
                    else f'is "mig", and so is group {taken[gpu]}: the MIG devices go to one group'
                )
                errors.append(ConfigError(problem, key=f"{key}.gpus"))
            taken.setdefault(gpu, name)
    return errors
