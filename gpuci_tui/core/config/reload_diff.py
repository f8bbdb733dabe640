"""What a re-read configuration changes, and which of it a running daemon can take live.

`diff_configs` compares the configuration a daemon runs with the file read again
(``gpuci-tui reload``, SIGHUP): per agent group kept, added or removed, and for
each changed value whether it applies *live* or needs a restart, with why. The
split follows what the daemon binds when it starts: the organisation, pools and
name prefixes name the agents, their containers, the instance's lock and socket;
the metrics port, the history file's bounds, the GPU sampling rate and the disk
watch are set up once. What the agent containers are made of (image, volumes,
memory limit, GPUs, ...) changes by replacing them, slot by slot (the roll-out);
the count scales; GPU admission is read at every GPU frame.

`ConfigDiff.applied` is the configuration the daemon holds afterwards: the old
one with only the live changes taken from the new one, so what `status`, the
socket and the metrics read never claims a change that did not happen.
Pure: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from gpuci_tui.core.config.model import AgentGroup, AgentsConfig, Config, agent_groups

__all__ = ["ConfigDiff", "FieldChange", "GroupDiff", "diff_configs", "reload_effect"]

#: Agent values that change live, with what happens (the agent spec rolls out, the rest applies).
_LIVE_AGENTS = {
    "count": "the group scales",
    "image": "the slots change image one by one (standby first, busy ones after their job)",
    "network": "the slots' containers are replaced one by one",
    "gpus": "the slots' containers are replaced one by one with their new GPUs",
    "volumes": "the slots' containers are replaced one by one",
    "oom_score_adj": "the slots' containers are replaced one by one",
    "mem_limit": "the slots' containers are replaced one by one",
    "gpu_admission": "applies at the next GPU sample",
    "gpu_hold_down": "applies at the next GPU sample",
    "standby_schedule": "applies now: standby lanes are added, or idle ones retired, to its count",
    "pull": "applies at the next agent start (the puller reads it before each start)",
    "pull_check_interval": "applies at the next agent start (the puller reads it before each start)",
}
#: Agent values a running daemon cannot change, and why (what was bound at start).
_RESTART_AGENTS = {
    "gpus_per_slot": "each slot's GPUs are planned from the host's topology when the daemon starts",
    "name_prefix": "the agents, their containers and the instance's lock are named after it",
    "standby": "each slot's second registration is planned when the daemon starts",
    "standby_min": "each slot's further registrations are planned when the daemon starts",
    "standby_max": "each slot's further registrations are planned when the daemon starts",
    "max_agents": "each slot's further registrations are planned when the daemon starts",
    "docker_socket": "the per-slot agent directories on the host are set up when the daemon starts",
}
#: Other sections: the fields that apply live; every other field needs a restart (`_WHY`).
_LIVE_OTHER = {
    "supervisor.canary_jobs": "the default for the next reload --canary",
    "azure.max_requests_per_minute": "applies now: the daemon's calls are capped at once",
    "keys": "the console reads it when it opens (reopen the console)",
    "fleet": "the console reads it when it opens (reopen the console)",
}
_GROUP_POOL = "the group's agents are registered in that pool, and its lock is named after it"
_WHY = {
    "azure.url": "the daemon's agents are registered in that organisation, and its lock and "
    "socket are named after it",
    "azure.pool": "the daemon's agents are registered in that pool, and its lock and socket "
    "are named after it",
    "azure.remove_offline_after": "the stale watch takes it when the daemon starts",
    "azure": "how the daemon signs in (and the PAT's expiry) is read when the daemon starts",
    "supervisor.poll_interval": "the pool is read on the interval set when the daemon starts",
    "supervisor": "the engine's rules are set when the daemon starts",
    "gpu": "the GPU sampling is set up when the daemon starts",
    "history": "the history is opened with its bounds when the daemon starts",
    "metrics": "the metrics endpoint is bound when the daemon starts",
    "docker": "the disk watch is set up when the daemon starts",
    "agents": "the [agents] defaults of the groups are read when the daemon starts",
}


@dataclass(frozen=True)
class FieldChange:
    """One value that differs between the running configuration and the file."""

    key: str
    """Dotted, as in the file (``groups.cuda12.image``, ``agents.image``, ``azure.url``)."""
    old: str
    new: str
    live: bool
    """Applied without a restart (else left as it runs until the daemon restarts)."""
    why: str
    """What happens (live) or why a restart is needed."""

    def words(self) -> str:
        """The change for an operator, e.g. ``azure.url: a restart is needed (...)``."""
        change = f"{self.key}: {self.old} -> {self.new}"
        if self.live:
            return f"{change}: {self.why}"
        return f"{change}: a restart is needed ({self.why})"


@dataclass(frozen=True)
class GroupDiff:
    """One agent group: kept (with its changed values), added or removed."""

    name: str
    status: str
    """``kept``, ``added`` or ``removed``."""
    changes: tuple[FieldChange, ...] = ()

    @property
    def live_changes(self) -> tuple[FieldChange, ...]:
        """The changes applied live."""
        return tuple(c for c in self.changes if c.live)


@dataclass(frozen=True)
class ConfigDiff:
    """Everything a reload would change, and the configuration the daemon holds after it."""

    groups: tuple[GroupDiff, ...]
    other: tuple[FieldChange, ...]
    """Changes outside the agent groups ([azure] url, [supervisor], [metrics], ...)."""
    applied: Config
    """The running configuration with the live changes of the new one (see the module)."""
    shape: str | None = None
    """Why the groups cannot change live at all (``[agents]`` alone <-> ``[groups]``), or None."""

    @property
    def changed(self) -> bool:
        """Whether the file differs from what runs in any way."""
        return bool(
            self.other or self.shape or any(g.status != "kept" or g.changes for g in self.groups)
        )

    @property
    def restart_needed(self) -> tuple[FieldChange, ...]:
        """Every change left for a restart."""
        kept = (c for g in self.groups for c in g.changes)
        return tuple(c for c in (*kept, *self.other) if not c.live)

    def lines(self) -> tuple[str, ...]:
        """The diff in words, one line per group or change (``no change`` when none)."""
        if not self.changed:
            return ("the configuration file has no change",)
        out: list[str] = []
        if self.shape:
            out.append(self.shape)
        for group in self.groups:
            label = group.name
            if group.status == "added":
                out.append(f"group {label}: added (its slots start)")
            elif group.status == "removed":
                out.append(f"group {label}: removed (its slots drain, no job is killed)")
            for change in group.changes:
                out.append(change.words())
        out.extend(change.words() for change in self.other)
        return tuple(out)


def diff_configs(old: Config, new: Config) -> ConfigDiff:
    """Compare the running configuration ``old`` with the file read again, ``new``.

    Both must be valid (`load_config` checked ``new``); the groups are matched by name.
    """
    old_groups, new_groups = agent_groups(old), agent_groups(new)
    implicit_old = len(old_groups) == 1 and old_groups[0].implicit
    implicit_new = len(new_groups) == 1 and new_groups[0].implicit
    other = _other_changes(old, new, grouped=not implicit_old)
    applied = _applied_other(old, new)
    if implicit_old != implicit_new:
        shape = (
            "groups: the file moves from [agents] alone to [groups.NAME] tables or back: "
            "a restart is needed (the agents' names, labels and saved intent change with it)"
        )
        return ConfigDiff((), other, applied, shape=shape)
    by_name = {g.name: g for g in new_groups}
    diffs: list[GroupDiff] = []
    groups: list[AgentGroup] = []
    for group in old_groups:
        fresh = by_name.get(group.name)
        if fresh is None:
            diffs.append(GroupDiff(group.name, "removed"))
            continue
        where = "agents" if implicit_old else f"groups.{group.name}"
        changes = _group_changes(group, fresh, where, implicit=implicit_old)
        diffs.append(GroupDiff(group.name, "kept", changes))
        groups.append(_kept(group, fresh))
    known = {g.name for g in old_groups}
    for group in new_groups:
        if group.name not in known:
            diffs.append(GroupDiff(group.name, "added"))
            groups.append(group)
    if implicit_old:
        applied = dataclasses.replace(applied, agents=groups[0].agents)
    else:
        applied = dataclasses.replace(applied, agents=new.agents, groups=tuple(groups))
    return ConfigDiff(tuple(diffs), other, applied)


def reload_effect(key: str) -> tuple[bool, str]:
    """Whether ``reload`` applies a change of ``key`` live, and what happens or why not.

    ``key`` is dotted as in the file: ``agents.image`` (also ``groups.NAME.image``),
    ``azure.url``, ``supervisor.canary_jobs``, ``keys.drain``, ``fleet.hosts``. The answer
    is the one `diff_configs` gives for such a change (the configuration reference shows it).

    Raises:
        KeyError: ``key`` names no key of the file.
    """
    section, _, rest = key.partition(".")
    parts = rest.split(".")
    name = parts[1] if section == "groups" and len(parts) > 1 else parts[0]
    if section in ("keys", "fleet"):
        return True, _LIVE_OTHER[section]
    if section in ("agents", "groups"):
        if section == "groups" and name == "pool":
            return False, _GROUP_POOL
        if name in _RESTART_AGENTS:
            return False, _RESTART_AGENTS[name]
        return True, _LIVE_AGENTS[name]
    if key in _LIVE_OTHER:
        return True, _LIVE_OTHER[key]
    return False, _WHY.get(key) or _WHY[section]


def _group_changes(
    old: AgentGroup, new: AgentGroup, where: str, *, implicit: bool
) -> tuple[FieldChange, ...]:
    changes: list[FieldChange] = []
    if old.pool != new.pool and not implicit:  # the implicit group's pool is [azure] pool
        why = _GROUP_POOL
        changes.append(FieldChange(f"{where}.pool", old.pool, new.pool, False, why))
    for field in dataclasses.fields(AgentsConfig):
        if field.name == "gpu_ids":
            continue  # written as part of gpus (a list, or { per_agent = [...] }): one change
        before, after = _agent_value(old.agents, field.name), _agent_value(new.agents, field.name)
        if before == after:
            continue
        key = f"{where}.{field.name}"
        live = field.name not in _RESTART_AGENTS
        why = _LIVE_AGENTS[field.name] if live else _RESTART_AGENTS[field.name]
        changes.append(FieldChange(key, _show(before), _show(after), live, why))
    return tuple(changes)


def _agent_value(agents: AgentsConfig, name: str) -> Any:
    """One agent value as the file says it (``gpus`` with its GPU ids)."""
    value = getattr(agents, name)
    if name == "gpus" and agents.gpu_ids:
        return f"{value} {list(agents.gpu_ids)}"
    if name == "standby_schedule" and value is not None:
        return f"[{value.words()}]"
    return value


def _kept(old: AgentGroup, new: AgentGroup) -> AgentGroup:
    """The group as it runs after the reload: the new values but those a restart changes."""
    held = {name: getattr(old.agents, name) for name in _RESTART_AGENTS}
    return dataclasses.replace(new, pool=old.pool, agents=dataclasses.replace(new.agents, **held))


def _other_changes(old: Config, new: Config, *, grouped: bool) -> tuple[FieldChange, ...]:
    changes: list[FieldChange] = []
    # Every [azure] key is compared: one left out (how the daemon signs in, the PAT's expiry)
    # made a reload answer "nothing to change" while the daemon went on with the old value.
    # The implicit group's pool shows as [azure] pool; with groups each group says its own.
    for field in dataclasses.fields(old.azure):
        if grouped and field.name == "pool":
            continue
        before, after = getattr(old.azure, field.name), getattr(new.azure, field.name)
        if before != after:
            key = f"azure.{field.name}"
            live = key in _LIVE_OTHER
            why = _LIVE_OTHER[key] if live else _WHY.get(key, _WHY["azure"])
            changes.append(FieldChange(key, _show(before), _show(after), live, why))
    for section in ("supervisor", "gpu", "history", "metrics", "docker"):
        before_table, after_table = getattr(old, section), getattr(new, section)
        for field in dataclasses.fields(before_table):
            before, after = getattr(before_table, field.name), getattr(after_table, field.name)
            if before == after:
                continue
            key = f"{section}.{field.name}"
            if key in _LIVE_OTHER:
                changes.append(
                    FieldChange(key, _show(before), _show(after), True, _LIVE_OTHER[key])
                )
            else:
                why = _WHY.get(key, _WHY[section])
                changes.append(FieldChange(key, _show(before), _show(after), False, why))
    for section in ("keys", "fleet"):
        if getattr(old, section) != getattr(new, section):
            changes.append(FieldChange(section, "…", "…", True, _LIVE_OTHER[section]))
    return tuple(changes)


def _applied_other(old: Config, new: Config) -> Config:
    """``old`` with the live values of the sections outside the groups taken from ``new``."""
    live_supervisor = {
        key.split(".", 1)[1]: getattr(new.supervisor, key.split(".", 1)[1])
        for key in _LIVE_OTHER
        if key.startswith("supervisor.")
    }
    cap = new.azure.max_requests_per_minute
    return dataclasses.replace(
        old,
        azure=dataclasses.replace(old.azure, max_requests_per_minute=cap),
        supervisor=dataclasses.replace(old.supervisor, **live_supervisor),
        keys=new.keys,
        fleet=new.fleet,
        path=new.path or old.path,
    )


def _show(value: Any) -> str:
    """A value as the file writes it, short."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "(unset)"
    if isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _short(value)
    return str(value)


def _short(value: Any) -> str:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        parts = (f"{k}={_show(v)}" for k, v in dataclasses.asdict(value).items() if v is not None)
        return "{" + ", ".join(parts) + "}"
    return str(value)
