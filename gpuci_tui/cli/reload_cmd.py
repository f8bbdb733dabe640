"""``gpuci-tui reload [--dry-run] [--reset-overrides] [--canary N] [--canary-jobs K]``.

The daemon re-reads its file.

The file is checked here first, by the same rules the daemon applies: an invalid
file is reported (exit 4) beside what the daemon runs on instead, and nothing is
sent, so the daemon keeps running as it is (the daemon is found by the link named
after the file, `reach`). Otherwise the daemon reads it again itself and answers what changed, what
applies live and what needs a restart (``--dry-run``: what would, nothing
changes). The same reload as SIGHUP on ``gpuci-tui run``.
"""

from __future__ import annotations

import argparse
import sys

from gpuci_tui.core.command_types import Reload
from gpuci_tui.core.host.control.client import ControlClient, ControlError

from . import exitcodes
from .common import CliExit, fail, no_daemon, print_result
from .reach import Reached, daemon_of

__all__ = ["add_reload_parser", "run_reload"]


def add_reload_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``reload`` subcommand."""
    reload = sub.add_parser(
        "reload",
        help="re-read the configuration file: apply what can change live, name the rest",
        description="The daemon reads its configuration file again. Images, counts, volumes, "
        "memory limits, GPU admission and groups change live (lanes are replaced one by one: "
        "standby first, busy ones after their job; no job is killed); what needs a restart is "
        "named. A runtime scale, pause or drain stays over the file (the answer lists them) until "
        "--reset-overrides drops them or a reload changes that count. An invalid file changes "
        "nothing. Same as SIGHUP on `gpuci-tui run`.",
    )
    reload.add_argument(
        "--dry-run",
        action="store_true",
        help="say what would change, and the overrides in force; change nothing",
    )
    reload.add_argument(
        "--reset-overrides",
        action="store_true",
        help="then drop the runtime overrides (a scale, a pause, drained slots): every group "
        "runs the file again (with --dry-run: say which)",
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


def run_reload(args: argparse.Namespace) -> int:
    """Send ``reload`` to the daemon of the configuration file; print its answer.

    A file that does not load is never sent for: ``reload`` says its problems and
    what the daemon runs on instead (exit 4, nothing changes); ``--dry-run`` also
    shows the daemon's own view (the overrides in force), still exit 4.
    """
    try:
        if args.canary < 0 or (args.canary_jobs is not None and args.canary_jobs < 1):
            raise CliExit(exitcodes.USAGE, "reload: --canary is 0 or more, --canary-jobs 1 or more")
        try:
            reached = daemon_of(args, tell=False)
        except CliExit as exc:
            if exc.code != exitcodes.CONFIG:
                raise
            raise CliExit(
                exc.code,
                f"{exc.message}\nno daemon runs for this configuration file: there is nothing "
                "to reload",
            ) from None
        command = Reload(
            dry_run=args.dry_run,
            canary=args.canary,
            canary_jobs=args.canary_jobs,
            reset_overrides=args.reset_overrides,
        )
        if reached.problem is not None:
            return _broken_file(reached, command)
        result = ControlClient(reached.socket, timeout=30.0).send(command)
        return print_result(result)
    except CliExit as exc:
        return fail(exc)
    except ControlError as exc:
        return no_daemon(exc)


def _broken_file(reached: Reached, command: Reload) -> int:
    """The file does not load: nothing is reloaded; a dry run still shows the daemon's view."""
    if command.dry_run:
        answer = ControlClient(reached.socket, timeout=30.0).send(command)
        print(answer.message)
        print(f"gpuci-tui: nothing would be reloaded: {reached.runs_on()}", file=sys.stderr)
    else:
        print(
            f"gpuci-tui: {reached.problem}\nnothing was reloaded: {reached.runs_on()}",
            file=sys.stderr,
        )
    return exitcodes.CONFIG
