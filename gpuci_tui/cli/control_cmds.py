"""``status``, ``drain``, ``resume``, ``restart``, ``scale``, ``pause``, ``unpause``, ``stop``."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from gpuci_tui.core.command_types import (
    Command,
    Drain,
    Pause,
    Restart,
    Resume,
    Scale,
    Stop,
    Unpause,
)
from gpuci_tui.core.config.file import is_ascii_number
from gpuci_tui.core.config.observe import parse_listen
from gpuci_tui.core.config.paths import history_db_path
from gpuci_tui.core.host.control.client import ControlClient, ControlError, SocketHandle
from gpuci_tui.core.models import SlotSnapshot, SlotState, SupervisorEvent
from gpuci_tui.core.store.file import damage_notice
from gpuci_tui.core.wire import to_dict

from . import exitcodes
from .common import CliExit, fail, no_daemon, print_result
from .reach import daemon_of
from .render import render_status


def parse_slot(text: str, command: str) -> tuple[str | None, int]:
    """``"3"`` → (None, 3); ``"cuda12/3"`` → ("cuda12", 3)."""
    group, _, number = text.rpartition("/")
    if is_ascii_number(number) and (not group or "/" not in group):
        return (group or None), int(number)
    raise CliExit(
        exitcodes.USAGE,
        f"{command}: {text!r} is not a slot; give SLOT or GROUP/SLOT, e.g. 0 or cuda12/0",
    )


def _targets(args: argparse.Namespace) -> list[tuple[str | None, tuple[int, ...] | None]]:
    """(group, slots) per command to send; slots None means every slot (of the group)."""
    if args.all and args.slots:
        raise CliExit(exitcodes.USAGE, f"{args.command}: give slot numbers or --all, not both")
    if args.all:
        return [(args.group, None)]
    if not args.slots:
        raise CliExit(
            exitcodes.USAGE, f"{args.command}: which slots? Give SLOT, GROUP/SLOT or --all"
        )
    if args.group:
        raise CliExit(
            exitcodes.USAGE, f"{args.command}: --group goes with --all; name slots as GROUP/SLOT"
        )
    by_group: dict[str | None, list[int]] = {}
    for text in args.slots:
        group, number = parse_slot(text, args.command)
        by_group.setdefault(group, []).append(number)
    return [(group, tuple(numbers)) for group, numbers in by_group.items()]


def build_commands(args: argparse.Namespace) -> list[Command]:
    """The command dataclasses for the parsed arguments (one per agent group named)."""
    name = args.command
    kinds: dict[str, type[Drain | Resume | Restart]] = {
        "drain": Drain,
        "resume": Resume,
        "restart": Restart,
    }
    if name in kinds:
        return [kinds[name](slots, group) for group, slots in _targets(args)]
    if name == "scale":
        return [Scale(args.count, getattr(args, "group", None))]
    if name == "pause":
        return [Pause()]
    if name == "unpause":
        return [Unpause()]
    if name == "stop":
        return [Stop(drain=args.drain)]
    raise CliExit(exitcodes.USAGE, f"unknown command {name}")


def run_control_command(args: argparse.Namespace) -> int:
    """Talk to the daemon of the configured agents (also when its file no longer loads)."""
    try:
        commands = [] if args.command == "status" else build_commands(args)
        reached = daemon_of(args)
        path = reached.socket
        if args.command == "status":
            listen = reached.config.metrics.listen if reached.config is not None else ""
            problems = [reached.notice()] if reached.problem is not None else []
            return _status(path, args.json, listen, problems)
        client = ControlClient(path)
        for command in commands:
            result = client.send(command)
            if (code := print_result(result)) != exitcodes.OK:
                return code
        if args.command == "drain" and args.wait:
            return _wait_drained(path, commands, args.timeout)
        return exitcodes.OK
    except CliExit as exc:
        return fail(exc)
    except ControlError as exc:
        return no_daemon(exc)


def _status(
    path: Path, as_json: bool, metrics_listen: str = "", problems: list[str] | None = None
) -> int:
    snapshot = ControlClient(path).snapshot()
    # Read from the state directory the daemon shares with us: a damaged history it moved aside.
    notice = damage_notice(history_db_path())
    if as_json:
        # The file's problems (said on stderr too) travel with the snapshot for scripts.
        warnings = [*(problems or []), *([notice] if notice else [])]
        print(
            json.dumps(
                {**to_dict(snapshot), "warnings": warnings},
                indent=2,
                sort_keys=True,
            )
        )
    else:
        print(render_status(snapshot))
        if notice:
            print(f"warning: {notice}")
        if metrics_listen:
            # From the configuration the daemon was started with ([metrics] listen).
            address, port = parse_listen(metrics_listen)
            print(f"Prometheus metrics: http://{address}:{port}/metrics")
    return exitcodes.OK


def _wanted(slot: SlotSnapshot, commands: list[Command]) -> bool:
    return any(
        isinstance(c, Drain)
        and (c.group is None or c.group == slot.group)
        and (c.slots is None or slot.slot in c.slots)
        for c in commands
    )


def _wait_drained(path: Path, commands: list[Command], timeout: float) -> int:
    """Follow the daemon's stream (`SocketHandle.updates`) until every targeted slot is drained."""

    async def follow() -> int:
        async for update in SocketHandle(path).updates():
            if isinstance(update, SupervisorEvent):
                print(update.message)
                continue
            wanted = [s for s in update.slots if _wanted(s, commands)]
            if all(s.state == SlotState.DRAINED for s in wanted):
                print("drained: " + (", ".join(s.name for s in wanted) or "no slots"))
                return exitcodes.OK
        print("gpuci-tui: the daemon went away while draining", file=sys.stderr)
        return exitcodes.NO_DAEMON

    try:
        return asyncio.run(asyncio.wait_for(follow(), timeout if timeout > 0 else None))
    except TimeoutError:
        print("gpuci-tui: timed out waiting for the drain", file=sys.stderr)
        return exitcodes.FAILED
