"""``gpuci-tui check-config``."""

from __future__ import annotations

import argparse

from gpuci_tui.core.config.model import AgentGroup, AgentsConfig
from gpuci_tui.core.wording import plural

from . import exitcodes
from .common import CliExit, config_path, fail, load


def check_config(args: argparse.Namespace) -> int:
    """Validate the configuration file; print every problem."""
    try:
        required = getattr(args, "require_host", False)
        config = load(args, check_gpus=True, unread="refuse" if required else "note")
    except CliExit as exc:
        return fail(exc)
    if not args.quiet:
        if not config.groups:
            summary = f"{plural(config.agents.count, 'slot')}, pool '{config.azure.pool}'"
            print(f"{config_path(args)}: OK ({summary})")
            print(f"  {admission_line(config.agents)}")
        else:
            print(f"{config_path(args)}: OK ({len(config.groups)} agent groups)")
            for group in config.groups:
                print(f"  {group_line(group)}")
                print(f"    {admission_line(group.agents)}")
    # An Entra identity's problems (wrong secret, no pool role) only show live.
    if config.azure.auth != "pat" or getattr(args, "live", False):
        from .identity_cmd import live_check

        try:
            return live_check(config)
        except CliExit as exc:  # e.g. the encrypted store's passphrase, without a terminal
            return fail(exc)
    return exitcodes.OK


def admission_line(agents: AgentsConfig) -> str:
    """``GPU admission: exclusive (…); hold-down 10 s`` (what keeps jobs off busy GPUs)."""
    if agents.gpus == "none":
        return "GPU admission: none (no GPU)"
    return f"GPU admission: {agents.gpu_admission.describe()}; hold-down {agents.gpu_hold_down:g} s"


def group_line(group: AgentGroup) -> str:
    """``cuda13: 2 slots gpu4-cuda13-0…, pool 'gpu13', image …, GPUs per agent 2,3``."""
    agents = group.agents
    ids = ",".join(agents.gpu_ids)
    gpus = {
        "list": f"GPUs {ids} (shared)",
        "per-agent": f"GPUs per agent {ids or '0,1,…'}",
        "all": "every GPU",
        "none": "no GPU",
        "mig": "one MIG device per slot",
    }.get(agents.gpus, agents.gpus)
    if agents.gpus == "per-agent" and agents.gpus_per_slot > 1:
        gpus += f", {agents.gpus_per_slot} per slot (NVLink kept together)"
    return (
        f"{group.name}: {plural(agents.count, 'slot')} {agents.name_prefix}-0…, pool '{group.pool}', "
        f"image {agents.image}, {gpus}"
    )
