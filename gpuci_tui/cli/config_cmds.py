"""``gpuci-tui check-config``."""

from __future__ import annotations

import argparse

from . import exitcodes
from .common import CliExit, config_path, fail, load


def check_config(args: argparse.Namespace) -> int:
    """Validate the configuration file; print every problem."""
    try:
        config = load(args, check_gpus=True)
    except CliExit as exc:
        return fail(exc)
    if not args.quiet:
        print(
            f"{config_path(args)}: OK ({config.agents.count} slot(s), pool '{config.azure.pool}')"
        )
    return exitcodes.OK
