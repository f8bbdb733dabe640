"""``gpuci-tui demo``: the console on the built-in simulated organisation."""

from __future__ import annotations

import argparse
import sys

from gpuci_tui.core.errors import GpuciError

from . import exitcodes

MAX_FOREIGN_AGENTS = 100_000
"""More than any pool holds; the simulated organisation keeps them all in memory."""


def run_demo(args: argparse.Namespace) -> int:
    """Start the simulation, run the console, then remove everything the demo made."""
    from gpuci_tui.app import make_app
    from gpuci_tui.demo import build_demo

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
    try:
        env = build_demo(
            agents=args.agents,
            jobs_per_minute=args.jobs_per_minute,
            docker=args.docker,
            startup=startup,
            auth=getattr(args, "auth", "pat"),
            foreign_agents=foreign,
        )
    except GpuciError as exc:
        print(f"gpuci-tui demo: {exc}", file=sys.stderr)
        return exitcodes.RUNTIME if args.docker else exitcodes.FAILED
    try:
        make_app(env.services(readonly=bool(getattr(args, "readonly", False)))).run()
    finally:
        env.close()
    return exitcodes.OK


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
