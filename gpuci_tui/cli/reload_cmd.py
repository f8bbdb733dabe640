"""``gpuci-tui reload [--dry-run] [--canary N] [--canary-jobs K]``: the daemon re-reads its file.

The file is checked here first, by the same rules the daemon applies: an invalid
file is reported (exit 4) and nothing is sent, so the daemon keeps running as it
is. Otherwise the daemon reads it again itself and answers what changed, what
applies live and what needs a restart (``--dry-run``: what would, nothing
changes). The same reload as SIGHUP on ``gpuci-tui run``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuci_tui.core.command_types import Reload
from gpuci_tui.core.host.control.client import ControlClient, ControlError

from . import exitcodes
from .common import CliExit, config_path, fail, load, no_daemon, print_result, socket_for

__all__ = ["add_reload_parser", "run_reload"]


def add_reload_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``reload`` subcommand."""
    reload = sub.add_parser(
        "reload",
        help="re-read the configuration file: apply what can change live, name the rest",
        description="The daemon reads its configuration file again. Images, counts, volumes, "
        "memory limits, GPU admission and groups change live (lanes are replaced one by one: "
        "standby first, busy ones after their job; no job is killed); what needs a restart is "
        "named. An invalid file changes nothing. Same as SIGHUP on `gpuci-tui run`.",
    )
    reload.add_argument(
        "--dry-run", action="store_true", help="say what would change; change nothing"
    )
    reload.add_argument(
        "--canary",
        type=int,
        default=0,
        metavar="N",
        help="N slots per group take a new agent spec first; the rest follow after "
        "--canary-jobs successful jobs there (a failing canary rolls back)",
    )
    reload.add_argument(
        "--canary-jobs",
        type=int,
        default=None,
        metavar="K",
        help="successful canary jobs before the rest follow (default: [supervisor] canary_jobs)",
    )


def _reachable(path: Path) -> bool:
    try:
        return bool(ControlClient(path, timeout=5.0).hello().get("ok"))
    except ControlError:
        return False


def _unchanged(args: argparse.Namespace) -> str:
    """What an unreadable file leaves as it was: the daemon of this file, or no daemon at all."""
    from gpuci_tui.core.errors import GpuciError
    from gpuci_tui.core.host.control.socket_links import config_link

    try:
        running = _reachable(config_link(config_path(args)))
    except GpuciError:  # no usable runtime directory: no daemon could have linked there
        running = False
    if running:
        return "nothing was reloaded: the daemon runs on the configuration it loaded"
    return "no daemon runs for this configuration file: there is nothing to reload"


def run_reload(args: argparse.Namespace) -> int:
    """Send ``reload`` to the daemon of the configuration file; print its answer."""
    from gpuci_tui.core.host.control.socket_links import config_link

    try:
        if args.canary < 0 or (args.canary_jobs is not None and args.canary_jobs < 1):
            raise CliExit(exitcodes.USAGE, "reload: --canary is 0 or more, --canary-jobs 1 or more")
        try:
            config = load(args)
        except CliExit as exc:
            raise CliExit(exc.code, f"{exc.message}\n{_unchanged(args)}") from None
        path = socket_for(config)
        if not _reachable(path):
            # A reload that adds or removes a group changes the instance the file names:
            # the daemon started from this file keeps a link named after the file.
            linked = config_link(config.path or config_path(args))
            path = linked if _reachable(linked) else path
        command = Reload(dry_run=args.dry_run, canary=args.canary, canary_jobs=args.canary_jobs)
        result = ControlClient(path, timeout=30.0).send(command)
        return print_result(result)
    except CliExit as exc:
        return fail(exc)
    except ControlError as exc:
        return no_daemon(exc)
