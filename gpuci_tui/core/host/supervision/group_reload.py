"""``reload`` on a running daemon: re-read the file, say what changes, apply what can change live.

The file the configuration was loaded from is read again and checked by the
same rules as at start; an invalid file changes nothing (its problems are the
answer). `reload_diff.diff_configs` says, per group, what changed and whether
it applies live. Then:

* a kept group with live changes gets them through `Supervisor.reconfigure`
  (the roll-out: standby lanes first, busy ones after their job; ``--canary``);
* an added group gets a new `Supervisor`, built by the same factory as at start
  (`GroupSupervisor.add_group`), with its lock, intent file and job recorder;
* a removed group drains (no job is killed) and is forgotten once empty.

A group whose new image the host's driver cannot run (`CudaGuard.refusal_now`, the
words of `gpu.cuda_fit`) is refused before any container starts: none of its
changes applies, its lanes keep the image they run (an added group is not added).

What needs a restart is named and left as it runs: the daemon's held
configuration takes only the live changes (`ConfigDiff.applied`), so `status`,
the socket and the metrics never claim a change that did not happen.
A dry run says all of it and changes nothing: its lines come from the diff and
from each group's `Supervisor.preview_reconfigure` (the engine's rules).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from gpuci_tui.core.command_types import CommandResult, Reload
from gpuci_tui.core.config.file import ConfigError
from gpuci_tui.core.config.loader import (
    AgentGroup,
    Config,
    agent_groups,
    for_group,
    load_config,
)
from gpuci_tui.core.config.reload_diff import ConfigDiff, GroupDiff, diff_configs
from gpuci_tui.core.engine.preview import CommandPreview
from gpuci_tui.core.errors import GpuciError
from gpuci_tui.core.host.reporter import Broadcaster
from gpuci_tui.core.host.supervision.supervisor import Supervisor
from gpuci_tui.core.models import SupervisorSnapshot
from gpuci_tui.core.wording import override_words, plural

__all__ = ["GroupSupervisor", "preview_reload", "reload"]


class GroupSupervisor(Protocol):
    """What a reload needs of `group_supervisor.GroupSupervisor` (no import cycle)."""

    config: Config
    config_loaded_at: float
    clock: Callable[[], float]
    implicit: bool
    children: dict[str, Supervisor]
    retiring: set[str]
    reporter: Broadcaster
    cuda_refusal: Callable[[Config], str] | None

    def snapshot(self) -> SupervisorSnapshot:
        """Every group's slots."""
        ...

    def add_group(self, config: Config, group: AgentGroup) -> Supervisor:
        """Build and start a group's supervisor."""
        ...

    def retire_group(self, name: str) -> None:
        """Drain a group and forget it once empty."""
        ...

    def reloaded(self) -> None:
        """Tell the listeners a reload was applied."""
        ...


log = logging.getLogger("gpuci_tui.reload")

Loader = Callable[[Path], Config]


def _read(sup: GroupSupervisor, load: Loader) -> tuple[ConfigDiff | None, str]:
    """The diff of the file read again, or why there is none (the message)."""
    path = sup.config.path
    if path is None:
        return None, "reload: this supervisor was not started from a configuration file"
    try:
        new = load(path)
    except ConfigError as exc:
        # Bad input loses nothing: everything keeps running as it is.
        return None, f"reload: the file has problems, nothing changed:\n{exc}"
    except GpuciError as exc:
        return None, f"reload: {exc}; nothing changed"
    return diff_configs(sup.config, new), ""


def preview_reload(
    sup: GroupSupervisor, command: Reload, load: Loader = load_config
) -> CommandPreview:
    """What ``reload`` would change now, in words (the answer's message); nothing changes.

    The overrides in force are listed too (a broken file's answer included): what the
    daemon runs that the file does not say, and whether ``--reset-overrides`` drops it.
    """
    diff, problem = _read(sup, load)
    if diff is None:
        overrides = _override_lines(sup, drop=False)
        return CommandPreview("reload", False, "\n".join([problem, *overrides]))
    refused = cuda_refusals(sup, diff)
    lines = [f"reload {sup.config.path}:"]
    for group in diff.groups:
        lines += [f"  {line}" for line in _group_lines(sup, diff, group)]
        if group.name in refused:
            lines.append(f"    {_refused_words(sup, group, refused[group.name])}")
        elif group.status == "kept" and group.live_changes:
            child = sup.children[group.name]
            config = for_group(diff.applied, _group(diff.applied, group.name))
            effects = child.preview_reconfigure(config, canary=command.canary)
            lines += [f"    {line}" for line in effects]
    lines += [f"  {line}" for line in _other_lines(diff)]
    lines += _override_lines(sup, drop=command.reset_overrides)
    return CommandPreview("reload", True, "\n".join(lines))


def _override_lines(sup: GroupSupervisor, *, drop: bool) -> list[str]:
    """The overrides in force, each beside the file's value, and what becomes of them."""
    overrides = sup.snapshot().overrides
    if not overrides:
        return []
    now = sup.clock()
    head = (
        "overrides dropped (--reset-overrides): the groups run the file"
        if drop
        else "overrides in force (they stay; reload --reset-overrides drops them):"
    )
    return [f"  {head}", *(f"    {override_words(o, now)}" for o in overrides)]


async def reload(
    sup: GroupSupervisor, command: Reload, load: Loader = load_config
) -> CommandResult:
    """Apply the file read again (a dry run answers `preview_reload`'s words instead)."""
    if command.dry_run:
        answer = preview_reload(sup, command, load)
        return CommandResult(answer.ok, answer.message)
    diff, problem = _read(sup, load)
    if diff is None:
        sup.reporter.event("reload", problem.splitlines()[0])
        return CommandResult(False, problem)
    canary_jobs = command.canary_jobs or diff.applied.supervisor.canary_jobs
    # Before anything changes: an image the driver cannot run never starts a roll-out.
    refused = await asyncio.to_thread(cuda_refusals, sup, diff)
    applied = diff.applied
    ok = not refused
    lines = [f"reloaded {sup.config.path}:"]
    for group in diff.groups:
        lines += [f"  {line}" for line in _group_lines(sup, diff, group)]
        if group.name in refused:
            words = _refused_words(sup, group, refused[group.name])
            lines.append(f"    {words}")
            applied = _restore(applied, sup, group)
            sup.reporter.event("reload", words)
        elif group.status == "kept" and group.live_changes:
            config = for_group(applied, _group(applied, group.name))
            result = sup.children[group.name].reconfigure(
                config, canary=command.canary, canary_jobs=canary_jobs
            )
            ok = ok and result.ok
            lines.append(f"    {result.message}")
        elif group.status == "added" and group.name in sup.children:
            # Removed by an earlier reload and still draining: two supervisors of one group never.
            ok = False
            lines.append("    not added: it is still draining from the last reload; reload again")
            applied = _without(applied, group.name)
        elif group.status == "added":
            try:
                sup.add_group(applied, _group(applied, group.name))
            except GpuciError as exc:  # its lock is held: another supervisor runs it
                ok = False
                lines.append(f"    not added: {exc}")
                applied = _without(applied, group.name)
        elif group.status == "removed":
            sup.retire_group(group.name)
    lines += [f"  {line}" for line in _other_lines(diff)]
    # The groups that drain stay until they are empty (their supervisors still run them).
    sup.config = applied
    sup.config_loaded_at = sup.clock()
    if command.reset_overrides:
        lines += _reset(sup)
    else:
        lines += _override_lines(sup, drop=False)
    sup.reloaded()
    message = "\n".join(lines)
    sup.reporter.event("reload", _summary(diff, refused))
    log.info("%s", message)
    return CommandResult(ok, message)


def _reset(sup: GroupSupervisor) -> list[str]:
    """Every kept group drops its overrides (a retiring group drains on)."""
    lines = []
    for name, child in sup.children.items():
        if name in sup.retiring:
            continue
        result = child.reset_overrides()
        lines.append(f"  {'' if sup.implicit else f'group {name}: '}{result.message}")
    return lines


def _group_lines(sup: GroupSupervisor, diff: ConfigDiff, group: GroupDiff) -> list[str]:
    name = "" if sup.implicit else f"group {group.name}: "
    if group.status == "added":
        agents = _group(diff.applied, group.name).agents
        start = "starts" if agents.count == 1 else "start"
        return [
            f"group {group.name}: added: {plural(agents.count, 'slot')} {start} ({agents.image})"
        ]
    if group.status == "removed":
        slots = [s for s in sup.snapshot().slots if s.group == group.name]
        busy = sum(1 for s in slots if s.job is not None)
        finish = "finishes its job" if busy == 1 else "finish their job"
        after = f", {busy} busy {finish} first" if busy else ""
        drain = "drains" if len(slots) == 1 else "drain"
        removed = f"{plural(len(slots), 'slot')} {drain}{after}"
        return [f"group {group.name}: removed: {removed}; no job is killed"]
    if not group.changes:
        return [f"{name}no change"] if name else []
    return [change.words() for change in group.changes]  # the key names the group


def _other_lines(diff: ConfigDiff) -> list[str]:
    lines = [diff.shape] if diff.shape else []
    lines += [change.words() for change in diff.other]
    if not diff.changed:
        lines.append("the configuration file has no change")
    return lines


def cuda_refusals(sup: GroupSupervisor, diff: ConfigDiff) -> dict[str, str]:
    """Group -> why the driver cannot run the image the reload would give it.

    Only the groups whose image or GPUs change, and the groups added: a reload that
    changes something else never holds a group for an image it already runs. Reads
    each image's configuration (a local Docker call, once per image id).
    """
    check = sup.cuda_refusal
    if check is None:
        return {}
    refused: dict[str, str] = {}
    for group in diff.groups:
        touched = any(c.key.endswith((".image", ".gpus")) for c in group.live_changes)
        if group.status == "added" or (group.status == "kept" and touched):
            reason = check(for_group(diff.applied, _group(diff.applied, group.name)))
            if reason:
                refused[group.name] = reason
    return refused


def _refused_words(sup: GroupSupervisor, group: GroupDiff, reason: str) -> str:
    name = "" if sup.implicit else f"group {group.name}: "
    if group.status == "added":
        return f"{name}not added: {reason}"
    image = _group(sup.config, group.name).agents.image
    return f"{name}not applied, its slots keep {image}: {reason}"


def _restore(applied: Config, sup: GroupSupervisor, group: GroupDiff) -> Config:
    """``applied`` with the refused group as it runs (an added one left out)."""
    if group.status == "added":
        return _without(applied, group.name)
    if sup.implicit:  # the implicit group is [agents] itself
        return dataclasses.replace(applied, agents=sup.config.agents)
    before = _group(sup.config, group.name)
    kept = tuple(before if g.name == group.name else g for g in applied.groups)
    return dataclasses.replace(applied, groups=kept)


def _summary(diff: ConfigDiff, refused: dict[str, str] | None = None) -> str:
    """The reload in one line, for the event log."""
    if not diff.changed:
        return "reload: the configuration file has no change"
    refused = refused or {}
    parts = [f"refused {', '.join(refused)} (CUDA)"] if refused else []
    for status in ("added", "removed"):
        names = [g.name for g in diff.groups if g.status == status and g.name not in refused]
        if names:
            parts.append(f"{status} {', '.join(names)}")
    live = sum(len(g.live_changes) for g in diff.groups if g.name not in refused)
    live += sum(1 for c in diff.other if c.live)
    if live:
        parts.append(f"{plural(live, 'change')} applied")
    if diff.restart_needed or diff.shape:
        restart = len(diff.restart_needed) + bool(diff.shape)
        parts.append(f"{restart} {'needs' if restart == 1 else 'need'} a restart")
    return "reload: " + "; ".join(parts)


def _group(config: Config, name: str) -> AgentGroup:
    return next(g for g in agent_groups(config) if g.name == name)


def _without(config: Config, name: str) -> Config:
    return dataclasses.replace(config, groups=tuple(g for g in config.groups if g.name != name))
