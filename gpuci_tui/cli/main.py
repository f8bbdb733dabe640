"""``gpuci-tui``: the console by default, plus scriptable daemon and control commands.

Run ``gpuci-tui COMMAND --help`` for each command. Exit codes: `exitcodes`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import textwrap
from collections.abc import Sequence

from gpuci_tui import __version__
from gpuci_tui.core.models import MAX_SLOTS

from . import exitcodes
from .agents_cmd import add_agents_parser
from .export_cmd import add_export_parser
from .gpu_cmd import add_gpu_parser
from .history_cmd import add_history_parser
from .image_cmd import add_image_parser
from .reload_cmd import add_reload_parser

DESCRIPTION = """\
Admin console and supervisor for single-job Azure Pipelines GPU agent containers.

Without a command, opens the console: the setup wizard when there is no
configuration yet, otherwise the dashboard (attached to the running daemon,
or starting one detached so that closing the SSH session does not stop it).
"""

EPILOG = textwrap.fill(
    "exit codes: " + ", ".join(f"{code} {words}" for code, words in exitcodes.MEANINGS.items()),
    width=79,
)
"""Made from `exitcodes.MEANINGS`, so a new code is listed where it is defined."""


VERBOSE_HELP = (
    "also print the log to standard error (-vv: with debug lines); without it, a command "
    "prints only its answer"
)

_OWN_LOG = (None, "setup", "run", "demo", "bridge")
"""Commands that send their log somewhere themselves: the console and ``demo`` own the
terminal, ``run`` logs to standard error (journald), ``bridge`` keeps its streams clean."""


def _route_log(args: argparse.Namespace) -> None:
    """A command's answer is what it prints: log lines (a retry, a slow read) go to standard
    error only with ``-v``, so they never come before, or in the middle of, the answer.
    """
    if args.command in _OWN_LOG:
        return
    if args.verbose:
        from .run_cmd import setup_logging

        setup_logging("DEBUG" if args.verbose > 1 else "INFO")
    elif not logging.getLogger().handlers:
        # Without a handler Python prints warnings to standard error itself (lastResort).
        logging.getLogger().addHandler(logging.NullHandler())


def _slots_args(parser: argparse.ArgumentParser, verb: str) -> None:
    parser.add_argument(
        "slots",
        nargs="*",
        metavar="SLOT",
        help=f"slots to {verb}: numbers, or GROUP/NUMBER with agent groups (e.g. cuda12/0)",
    )
    parser.add_argument(
        "--all", action="store_true", help=f"{verb} every slot (of --group, when given)"
    )
    parser.add_argument("--group", help="with --all: only this agent group")


def build_parser() -> argparse.ArgumentParser:
    """The whole command line (kept apart from running it, for tests)."""
    parser = argparse.ArgumentParser(
        prog="gpuci-tui",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gpuci-tui {__version__}")
    parser.add_argument(
        "--config",
        metavar="PATH",
        help="configuration file (default: $GPUCI_CONFIG or ~/.config/gpuci-tui/config.toml)",
    )
    parser.add_argument("--readonly", action="store_true", help="console: disable every action")
    parser.add_argument(
        "--foreground",
        action="store_true",
        help="console: run the supervisor inside the console instead of a detached daemon",
    )
    parser.add_argument(
        "--host",
        action="append",
        default=[],
        metavar="[USER@]HOST[:PORT]",
        help="console: watch the daemons of these hosts over ssh (repeat the option; "
        "replaces [fleet] hosts)",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help=VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    sub.add_parser("setup", help="run the setup wizard (on the existing configuration if any)")
    run = sub.add_parser(
        "run",
        help="run the supervisor in the foreground with its control socket (systemd target)",
        description="Run the supervisor in the foreground. SIGINT/SIGTERM stop it and leave "
        "the agents running; `gpuci-tui stop --drain` drains them first.",
    )
    run.add_argument(
        "--log-level",
        default="INFO",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="the least important log lines printed to standard error (default INFO)",
    )

    status = sub.add_parser("status", help="show the daemon's slots, agents and jobs")
    status.add_argument("--json", action="store_true", help="print the snapshot as JSON")

    drain = sub.add_parser(
        "drain",
        help="disable agents on the server, stop idle ones; busy ones finish their job",
        description="Drain slots: each agent is disabled on the server first; idle ones are "
        "stopped after a re-check; busy ones finish their job and are not replaced.",
    )
    _slots_args(drain, "drain")
    drain.add_argument("--wait", action="store_true", help="wait until the slots are drained")
    drain.add_argument(
        "--timeout", type=float, default=0, help="with --wait: give up after N s (0: never)"
    )

    resume = sub.add_parser("resume", help="undo drain/park: fill the slots again")
    _slots_args(resume, "resume")
    restart = sub.add_parser("restart", help="replace idle agents now, busy ones after their job")
    _slots_args(restart, "restart")
    scale = sub.add_parser("scale", help="change the number of slots (scaling down drains)")
    scale.add_argument("count", type=int, help=f"new number of slots (1-{MAX_SLOTS})")
    scale.add_argument("--group", help="the agent group to scale (needed with several)")
    sub.add_parser("pause", help="stop replenishing (running agents stay)")
    sub.add_parser("unpause", help="replenish again")
    stop = sub.add_parser("stop", help="stop the daemon; agents stay running unless --drain")
    stop.add_argument("--drain", action="store_true", help="drain every agent first, then stop")
    add_reload_parser(sub)

    demo = sub.add_parser(
        "demo",
        help="the console on a built-in simulated organisation (touches nothing real)",
        description="A simulated organisation, a real daemon with its control socket and the "
        "console, in a temporary folder of their own, all removed at the end (quit, "
        "`gpuci-tui stop`, Ctrl+C, SIGTERM). It prints how another shell reaches it: "
        "`gpuci-tui --config FOLDER/config.toml status`, and every other command.",
    )
    demo.add_argument(
        "--docker",
        action="store_true",
        help="use real emulator containers on the local Docker engine",
    )
    demo.add_argument(
        "--no-console",
        action="store_true",
        help="run the demo's daemon in the foreground without the console (try the "
        "command line on it from another shell; Ctrl+C ends the demo)",
    )
    demo.add_argument("--agents", type=int, default=4, help="number of slots (default 4)")
    demo.add_argument(
        "--auth",
        choices=("pat", "service-principal"),
        default="pat",
        help="sign in with a PAT (default) or as a service principal of the simulated tenant",
    )
    demo.add_argument(
        "--jobs-per-minute",
        type=float,
        default=None,
        help="job arrival rate (default: 80%% of what the agents can take; at most 2 jobs "
        "per agent wait, whatever the rate)",
    )
    demo.add_argument(
        "--agent-startup",
        default="6,3",
        metavar="REGISTER,SESSION",
        help="seconds a simulated agent takes to register, then to get its session "
        "(default 6,3: like the real agent)",
    )
    demo.add_argument(
        "--foreign-agents",
        type=int,
        default=0,
        metavar="N",
        help="also put N agents of other hosts in the pool, as a shared pool of a large "
        "organisation holds (default 0)",
    )

    token = sub.add_parser("token", help="store, check or delete the PAT (keyring)")
    token.add_argument(
        "action",
        choices=("set", "check", "delete"),
        help="set: store the PAT (asked, or --stdin); check: sign in with it and check the "
        "pool; delete: remove it from the keyring",
    )
    token.add_argument("--stdin", action="store_true", help="set: read the PAT from standard input")

    check = sub.add_parser(
        "check-config",
        help="validate the configuration file and say what is wrong",
        description="Check the configuration file by every rule `gpuci-tui run` starts with, "
        "each problem under its own key, with the fix (exit 4). Where this host's GPUs can "
        "be read (NVML), the file is also checked against them: the GPU count, the slot "
        "shapes (gpus_per_slot, MIG) on the GPU topology, the GPU ids, and each image's "
        "CUDA against the driver; where they cannot, a note says what was not checked.",
    )
    check.add_argument(
        "--quiet",
        action="store_true",
        help="print only the problems (nothing when the file is valid); the exit code says which",
    )
    check.add_argument(
        "--host",
        dest="require_host",
        action="store_true",
        help="this host must be checkable: when the file gives agents GPUs and this host's "
        "GPUs cannot be read, fail (exit 1) instead of noting it (run it on the GPU host "
        "that will run the file)",
    )
    check.add_argument(
        "--live",
        action="store_true",
        help="also sign in and check the pool's permissions (always done for a service "
        "principal or managed identity)",
    )
    bridge = sub.add_parser(
        "bridge",
        help="join stdin/stdout to the local daemon's control socket (run by the fleet console over ssh)",
    )
    bridge.add_argument(  # also after the subcommand: ssh HOST gpuci-tui bridge --config PATH
        "--config", metavar="PATH", default=argparse.SUPPRESS, help="that daemon's configuration"
    )
    bridge.add_argument(
        "--socket", metavar="PATH", help="this socket instead of the config's daemon's"
    )
    bridge.add_argument(  # where a forced command in authorized_keys puts it
        "--readonly",
        action="store_true",
        default=argparse.SUPPRESS,
        help="refuse every command (stop, scale, drain, ...): consoles only watch",
    )
    add_export_parser(sub)
    add_history_parser(sub)
    add_gpu_parser(sub)
    add_agents_parser(sub)
    add_image_parser(sub)
    for command in sub.choices.values():
        # Also after the command (gpuci-tui status -v); absent there, the top level's count.
        command.add_argument(
            "-v", "--verbose", action="count", default=argparse.SUPPRESS, help=VERBOSE_HELP
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gpuci-tui`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = _dispatch(args)
        # Flush here, not at interpreter exit, so a closed pipe is caught below.
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _output_closed()
    except KeyboardInterrupt:
        return exitcodes.INTERRUPTED
    except Exception:  # noqa: BLE001 - a crash: Python's own traceback could print the PAT
        import traceback

        from gpuci_tui.core.secrets.redaction import redact

        print(redact(traceback.format_exc()), file=sys.stderr, end="")
        return exitcodes.FAILED


def _output_closed() -> int:
    """The reader of stdout is gone (``| head``): exit quietly, as a SIGPIPE'd tool would.

    Python's own flush of stdout at exit would fail again and print "Exception
    ignored … BrokenPipeError", so stdout is pointed at /dev/null first.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return exitcodes.OUTPUT_CLOSED


_TERMINAL_APPS = (None, "setup", "demo", "bridge")
"""Commands that own the terminal (Textual) or a byte stream (the bridge): not escaped."""


def _dispatch(args: argparse.Namespace) -> int:
    command = args.command
    _route_log(args)
    if command != "demo":
        _adopt_demo(args)
    if command not in _TERMINAL_APPS:
        from .safe_output import install

        install()  # log tails, names and config values never drive the operator's terminal
    if args.host and command is not None:
        print(
            f"gpuci-tui: --host opens the fleet console; it does not go with {command!r} "
            f"(for one host: ssh HOST gpuci-tui {command})",
            file=sys.stderr,
        )
        return exitcodes.USAGE
    if command in ("status", "drain", "resume", "restart", "scale", "pause", "unpause", "stop"):
        from .control_cmds import run_control_command

        return run_control_command(args)
    if command == "reload":
        from .reload_cmd import run_reload

        return run_reload(args)
    if command == "run":
        from .run_cmd import run_daemon

        return run_daemon(args)
    if command == "demo":
        from .demo_cmd import run_demo

        return run_demo(args)
    if command == "token":
        from .token_cmd import run_token

        return run_token(args)
    if command == "history":
        from .history_cmd import run_history

        return run_history(args)
    if command == "check-config":
        from .config_cmds import check_config

        return check_config(args)
    if command == "export":
        from .export_cmd import run_export

        return run_export(args)
    if command == "gpu":
        from .gpu_cmd import run_gpu

        return run_gpu(args)
    if command == "image":
        from .image_cmd import run_image

        return run_image(args)
    if command == "bridge":
        from .bridge_cmd import run_bridge

        return run_bridge(args)
    if command == "agents":
        from .agents_cmd import run_agents

        return run_agents(args)
    from .fleet_cmd import fleet_requested, run_fleet_console

    if fleet_requested(args):
        return run_fleet_console(args)
    from .console_cmd import run_console

    return run_console(args, setup=command == "setup")


def _adopt_demo(args: argparse.Namespace) -> None:
    """Given a running demo's configuration, use the demo's folder (`demo_instance.adopt`)."""
    from gpuci_tui.core.errors import GpuciError
    from gpuci_tui.demo_instance import adopt

    from .common import config_path

    # An unusable --config: the command itself says what is wrong with it.
    with contextlib.suppress(GpuciError):
        adopt(config_path(args))


if __name__ == "__main__":
    sys.exit(main())
