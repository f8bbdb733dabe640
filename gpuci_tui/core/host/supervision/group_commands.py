"""Operator commands over several agent groups: which groups a command is for, one answer.

A `GroupSupervisor` handles the host-wide commands itself (``reload``, ``prune``,
``gpu clear``) and routes every other one here: ``pause``, ``unpause`` and ``stop``
go to every group, a command that names a group (``GROUP/SLOT`` on the command line)
to that group, and ``scale`` or a slot command that names none is refused while
there are several groups, since slot numbers repeat from group to group. A
configuration without ``[groups]`` (one implicit group) sends everything to it.
The groups' answers and previews are merged into one, as a lone supervisor's.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuci_tui.core.command_types import (
    Command,
    CommandResult,
    Drain,
    Pause,
    Restart,
    Resume,
    Scale,
    Stop,
    Unpause,
)
from gpuci_tui.core.engine.preview import CommandPreview
from gpuci_tui.core.host.supervision.supervisor import Supervisor


def route(
    children: Mapping[str, Supervisor], implicit: bool, command: Command
) -> tuple[list[Supervisor], str | None]:
    """The groups ``command`` is for, or why it cannot be routed.

    Args:
        children: every group's supervisor, by group name.
        implicit: the configuration has no ``[groups]`` (its one group takes everything).
        command: the operator's command.
    """
    names = ", ".join(children)
    if implicit:
        return list(children.values()), None
    if isinstance(command, Pause | Unpause | Stop):
        return list(children.values()), None
    group = getattr(command, "group", None)
    if group is not None:
        child = children.get(group)
        if child is None:
            return [], f"no agent group {group!r} (groups are {names})"
        return [child], None
    if isinstance(command, Scale):
        return [], f"scale: name the group to scale (groups are {names})"
    if isinstance(command, Drain | Resume | Restart) and command.slots is not None:
        example = f"{next(iter(children))}/{command.slots[0]}"
        return [], f"name the group of the slots, e.g. {example} (groups are {names})"
    return list(children.values()), None


async def execute_routed(
    children: Mapping[str, Supervisor], implicit: bool, command: Command
) -> CommandResult:
    """Carry out ``command`` on the groups it is for (see `route`); one answer for all."""
    targets, problem = route(children, implicit, command)
    if problem is not None:
        return CommandResult(False, problem)
    results = [await child.execute(command) for child in targets]
    if len(results) == 1:
        return results[0]
    message = "; ".join(
        f"{child.group}: {result.message}" for child, result in zip(targets, results, strict=True)
    )
    return CommandResult(all(r.ok for r in results), message)


def preview_routed(
    children: Mapping[str, Supervisor], implicit: bool, command: Command
) -> CommandPreview:
    """What ``command`` would do over the groups it is for: the first refusal, or every effect."""
    name = type(command).__name__.lower()
    targets, problem = route(children, implicit, command)
    if problem is not None:
        return CommandPreview(name, False, problem)
    answers = [child.preview(command) for child in targets]
    failed = next((a for a in answers if not a.ok), None)
    if failed is not None:
        return failed
    return CommandPreview(name, True, effects=tuple(e for a in answers for e in a.effects))
