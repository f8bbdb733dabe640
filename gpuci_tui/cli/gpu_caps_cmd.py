"""``gpuci-tui gpu capabilities``: what each slot's agents advertise on this host.

Reads the GPUs through NVML (no daemon needed; for a demo's configuration, the demo's
synthetic GPUs its agents run on) and prints, per group and slot,
the capabilities its agents report and a demand a pipeline can use to land
there; ``--json`` for scripts. See docs/gpus.md, "GPU capabilities".
"""

from __future__ import annotations

import argparse
import json
import socket

from gpuci_tui.core.config.model import agent_groups, for_group
from gpuci_tui.core.gpu.capabilities import PRODUCT

from . import exitcodes
from .common import CliExit, config_path, fail, load


def add_caps_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``gpu capabilities`` action."""
    caps = actions.add_parser(
        "capabilities",
        help="print the GPU capabilities each slot's agents advertise (for pipeline demands)",
    )
    caps.add_argument("--json", action="store_true", help="one JSON object: group → slot → caps")


def run_caps(args: argparse.Namespace) -> int:
    """Print every slot's capabilities under this host's GPUs."""
    from gpuci_tui.core.config.slot_shapes import use_topology
    from gpuci_tui.core.gpu.nvml_sampler import NvmlSampler
    from gpuci_tui.core.gpu.nvml_topology import read_nvml_topology
    from gpuci_tui.core.host.gpus.caps import SlotCapabilities, facts_reader
    from gpuci_tui.demo_instance import demo_gpus

    try:
        config = load(args)
    except CliExit as exc:
        return fail(exc)
    # A demo's agents advertise the demo's synthetic GPUs, not this host's.
    sampler = demo_gpus(config_path(args)) or NvmlSampler()
    try:
        facts = facts_reader(sampler)()
        reason = sampler.host_info().reason
        # Shaped slots (gpus_per_slot, MIG) get their devices from the topology.
        topology = read_nvml_topology(sampler)
    finally:
        sampler.close()
    use_topology(lambda: topology)
    host = socket.gethostname()
    of_slot = SlotCapabilities(lambda: facts, host)
    found: dict[str, dict[str, dict[str, str]]] = {}
    for group in agent_groups(config):
        scoped = for_group(config, group)
        found[group.name] = {
            str(slot): of_slot(scoped, slot) for slot in range(scoped.agents.count)
        }
    if args.json:
        print(json.dumps(found, indent=2, sort_keys=True))
        return exitcodes.OK
    if not facts.gpus:
        print(f"no GPU seen ({reason or 'NVML answered no GPU'}): agents advertise only the host")
    for name_of_group, slots in found.items():
        for slot, caps in slots.items():
            print(f"{name_of_group} slot {slot}:")
            for name, value in caps.items():
                print(f"  {name} = {value}")
            if PRODUCT in caps:
                print(f"  demand: {PRODUCT} -equals {caps[PRODUCT]}")
    return exitcodes.OK


__all__ = ["add_caps_parser", "run_caps"]
