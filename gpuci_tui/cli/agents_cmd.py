"""``gpuci-tui agents prune [--dry-run] [--yes]``: the pool's stale registrations, listed or removed.

Through the daemon when one runs: it judges with its own view (the lanes it
holds now, draining ones included), its events land in its log and console, and
its one backoff covers the calls. With no daemon, the same rule runs here,
directly against the organisation, with the configuration's lanes as the
current ones (nothing else can be using them while no daemon runs).

Either way a removal is confirmed first: on a terminal by a question, in a
script by ``--yes``; with neither, nothing is removed and the fix is said.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuci_tui.core.command_types import CommandResult, Prune
from gpuci_tui.core.errors import AzureError
from gpuci_tui.core.host.control.client import ControlClient, ControlError

from . import exitcodes
from .common import CliExit, fail, load, no_daemon
from .reach import daemon_of

if TYPE_CHECKING:
    from gpuci_tui.core.config.loader import Config
    from gpuci_tui.core.protocols import AgentPoolApi

NO_CONFIRMATION = (
    "agents prune: not removing anything without a confirmation, and standard input is "
    "not a terminal to ask on; check the list with --dry-run, then run again with --yes"
)


def add_agents_parser(sub: Any) -> None:
    """The ``agents`` command and its ``prune`` subcommand."""
    agents = sub.add_parser("agents", help="the pool's agent registrations (prune stale ones)")
    verbs = agents.add_subparsers(dest="agents_command", metavar="ACTION", required=True)
    prune = verbs.add_parser(
        "prune",
        help="remove this host's stale registrations (offline, idle, backing no agent slot)",
    )
    prune.add_argument("--dry-run", action="store_true", help="only list them")
    prune.add_argument("--yes", action="store_true", help="remove without asking (for scripts)")


Send = Callable[[Prune], CommandResult]


def run_agents(
    args: argparse.Namespace,
    *,
    api: AgentPoolApi | None = None,
    ask: Callable[[str], str] = input,
    interactive: Callable[[], bool] = lambda: sys.stdin.isatty(),
) -> int:
    """Run ``agents prune``; ``api``/``ask``/``interactive`` are for tests."""
    try:
        send = _daemon(daemon_of(args).socket) if api is None else None
        if send is None:
            send = _direct(load(args), api)  # no daemon: the file must load
        listing = send(Prune(dry_run=True))
        print(listing.message)
        if not listing.ok:
            return exitcodes.FAILED
        if args.dry_run or not listing.affected:
            return exitcodes.OK
        if not args.yes:
            if not interactive():
                raise CliExit(exitcodes.USAGE, NO_CONFIRMATION)
            count = len(listing.affected)
            answer = ask(
                f"Remove {'this registration' if count == 1 else f'these {count}'}? [y/N] "
            )
            if answer.strip().lower() not in ("y", "yes"):
                print("nothing removed")
                return exitcodes.OK
        # Only what was shown; each is read and judged again before its DELETE.
        result = send(Prune(agent_ids=listing.affected))
        print(result.message)
        return exitcodes.OK if result.ok else exitcodes.FAILED
    except CliExit as exc:
        return fail(exc)
    except ControlError as exc:
        return no_daemon(exc)


def _daemon(path: Path) -> Send | None:
    """Send through the daemon's control socket at ``path``, or None when no daemon answers."""
    try:
        if not ControlClient(path, timeout=3.0).hello().get("ok"):
            return None
    except ControlError:
        return None
    # A prune waits for the pool read with capabilities and one call per removal.
    client = ControlClient(path, timeout=120.0)
    return client.send


def _direct(config: Config, api: AgentPoolApi | None) -> Send:
    """Judge and remove here, against the organisation (no daemon runs)."""
    from gpuci_tui.core.config.loader import agent_groups
    from gpuci_tui.core.docker.agentspec import host_marker
    from gpuci_tui.core.engine.stale import stale_registrations
    from gpuci_tui.core.host.observers.stale_watch import (
        current_lane_names,
        describe,
        held_by_a_daemon,
        own_instances,
        ownership,
        remove_stale,
        summary,
    )
    from gpuci_tui.core.registrations import StaleRegistration
    from gpuci_tui.core.wording import plural

    if api is None:
        from .run_cmd import real_services

        api = real_services(config)[0]
    client = api
    pools = list(dict.fromkeys(g.pool for g in agent_groups(config)))

    def event(kind: str, message: str, *_: object, **__: object) -> None:
        print(message)

    def send(command: Prune) -> CommandResult:
        found: list[StaleRegistration] = []
        ids: list[int] = []
        words: list[str] = []
        ok = True
        for name in pools:
            try:
                pool_id = client.resolve_pool(name).id
                agents = client.list_agents(pool_id, include_capabilities=True)
                owner = ownership(
                    own_instances(config, name), host_marker(), agents, probe=held_by_a_daemon
                )
                names = current_lane_names(config, name)
                stale = stale_registrations(agents, owner, names, time.time())
                if command.agent_ids is not None:
                    stale = tuple(s for s in stale if s.agent_id in command.agent_ids)
                if command.dry_run:
                    found.extend(stale)
                    ids.extend(s.agent_id for s in stale)
                    continue
                done = remove_stale(client, pool_id, stale, owner, names, event)
            except AzureError as exc:
                return CommandResult(False, f"pool {name}: {exc}")
            ids.extend(s.agent_id for s in done.removed)
            words.append(summary(done))
            ok = ok and done.error is None
        if command.dry_run:
            if not found:
                return CommandResult(True, "no stale registrations")
            head = f"{plural(len(found), 'stale registration')} would be removed:"
            return CommandResult(True, "\n".join([head, *describe(found)]), tuple(ids))
        return CommandResult(ok, "; ".join(words), tuple(ids))

    return send
