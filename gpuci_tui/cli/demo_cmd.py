"""``gpuci-tui demo``: the console on the built-in simulated organisation."""

from __future__ import annotations

import argparse
import sys

from gpuci_tui.core.protocols import GpuciError

from . import exitcodes


def run_demo(args: argparse.Namespace) -> int:
    """Start the simulation, run the console, then remove everything the demo made."""
    from gpuci_tui.app import make_app
    from gpuci_tui.demo import build_demo

    if not 1 <= args.agents <= 32:
        print("gpuci-tui demo: --agents must be from 1 to 32", file=sys.stderr)
        return exitcodes.USAGE
    try:
        env = build_demo(
            agents=args.agents, jobs_per_minute=args.jobs_per_minute, docker=args.docker
        )
    except GpuciError as exc:
        print(f"gpuci-tui demo: {exc}", file=sys.stderr)
        return exitcodes.RUNTIME if args.docker else exitcodes.FAILED
    try:
        make_app(env.services(readonly=bool(getattr(args, "readonly", False)))).run()
    finally:
        env.close()
    return exitcodes.OK
