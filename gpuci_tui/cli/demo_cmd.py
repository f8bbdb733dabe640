"""``gpuci-tui demo``: the simulated organisation, a real daemon and the console, in /tmp.

The demo makes its own instance (`demo_instance`): a temporary folder that
holds its configuration file and every file it writes, and this process's XDG
directories point there. On it run a real daemon with its control socket and
the console attached to that socket (`demo_run`); ``--no-console`` runs the
daemon alone in the foreground, for trying the command line from another shell.
At the end (the console quits, ``gpuci-tui stop``, SIGINT, SIGTERM, SIGHUP)
everything the demo made is removed, folder included.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from typing import TYPE_CHECKING

from gpuci_tui.core.errors import GpuciError

from . import exitcodes

if TYPE_CHECKING:
    from gpuci_tui.core.config.loader import Config

MAX_FOREIGN_AGENTS = 100_000
"""More than any pool holds; the simulated organisation keeps them all in memory."""


def run_demo(args: argparse.Namespace) -> int:
    """Start the simulation and its daemon, run the console, then remove everything."""
    from gpuci_tui.demo import build_demo
    from gpuci_tui.demo_instance import DemoInstance
    from gpuci_tui.demo_run import DemoSession, Ending

    if not 1 <= args.agents <= 32:
        print("gpuci-tui demo: --agents must be from 1 to 32", file=sys.stderr)
        return exitcodes.USAGE
    foreign = getattr(args, "foreign_agents", 0)
    if not 0 <= foreign <= MAX_FOREIGN_AGENTS:
        print(
            f"gpuci-tui demo: --foreign-agents must be from 0 to {MAX_FOREIGN_AGENTS:,} "
            f"(got {foreign})",
            file=sys.stderr,
        )
        return exitcodes.USAGE
    startup = parse_startup(args.agent_startup)
    if startup is None:
        print(
            "gpuci-tui demo: --agent-startup must be two numbers of seconds from 0 to 60, "
            f"like 6,3 (got {args.agent_startup!r})",
            file=sys.stderr,
        )
        return exitcodes.USAGE
    with Ending() as ending:
        instance = DemoInstance.create()
        instance.enter()  # this process's gpuci-tui files: the demo's folder
        try:
            env = build_demo(
                agents=args.agents,
                jobs_per_minute=args.jobs_per_minute,
                docker=args.docker,
                startup=startup,
                auth=getattr(args, "auth", "pat"),
                instance=instance,
                foreign_agents=foreign,
            )
        # A failure, or a signal, while it starts: `build_demo` undid what it made.
        except KeyboardInterrupt:
            return ending.exit_code
        except GpuciError as exc:
            _say(f"gpuci-tui demo: {exc}", error=True)
            return exitcodes.RUNTIME if args.docker else exitcodes.FAILED
        code = exitcodes.OK
        console = not getattr(args, "no_console", False)
        session = None
        try:
            _daemon_log(env.config, console)
            session = DemoSession(env, ending, say=_say)
            session.run(console=console, readonly=bool(getattr(args, "readonly", False)))
        except KeyboardInterrupt:
            pass  # a signal while the daemon started: the clean-up below
        except GpuciError as exc:
            _say(f"gpuci-tui demo: {exc}", error=True)
            code = exitcodes.FAILED
        finally:
            if session is not None:
                session.finish()
            else:
                env.close()
    return ending.exit_code if ending.signal is not None else code


def _daemon_log(config: Config, console: bool) -> None:
    """The demo's daemon logs as ``gpuci-tui run``: to stderr in the foreground
    (``--no-console``), else (the console owns the terminal) to its log file in the
    demo's folder, as a detached daemon's does.
    """
    from gpuci_tui.core.config.loader import daemon_instance
    from gpuci_tui.core.config.paths import log_dir

    from .run_cmd import setup_logging

    if not console:
        setup_logging("INFO")
        return
    path = log_dir() / f"daemon-{daemon_instance(config)}.log"
    setup_logging("INFO", logging.FileHandler(path, encoding="utf-8"))


def _say(text: str, *, error: bool = False) -> None:
    """Print, unless the terminal is gone (SIGHUP: nobody reads it any more)."""
    with contextlib.suppress(OSError):
        print(text, file=sys.stderr if error else sys.stdout, flush=True)


def parse_startup(text: str) -> tuple[float, float] | None:
    """``"6,3"`` → (6.0, 3.0); None when it is not two numbers from 0 to 60."""
    parts = text.split(",")
    if len(parts) != 2:
        return None
    try:
        register, session = (float(part) for part in parts)
    except ValueError:
        return None
    if not (0 <= register <= 60 and 0 <= session <= 60):
        return None
    return register, session
