"""The agents step's slot shape, offered where the hardware has one.

With several GPUs an agent may get N of them (``gpus_per_slot``: NVLink-joined
GPUs are kept together); with GPUs in MIG mode an agent may get one MIG slice
each (``gpus = "mig"``). The field stays hidden on a host with one GPU and no
MIG device, where neither means anything. The topology is read once, in a
thread (`core.gpu.nvml_topology`), from the console's GPU sampler.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from textual.widget import Widget
from textual.widgets import Input, Static

from gpuci_tui.core.config.slot_shapes import HostTopology, ShapeError, gpu_slots, mig_slots
from gpuci_tui.screens.wizard_base import config_problem

if TYPE_CHECKING:
    from gpuci_tui.core.config.loader import Config
    from gpuci_tui.screens.wizard_base import Step

SHAPE_LABEL = "GPUs per agent: a number (GPUs joined by NVLink are kept together), or mig (one agent per MIG slice)"


def shape_fields(config: Config | None) -> Iterable[Widget]:
    """The shape's label, input and what the host has (hidden until the host is read)."""
    agents = config.agents if config is not None else None
    value = ""
    if agents is not None and agents.gpus == "mig":
        value = "mig"
    elif agents is not None and agents.gpus_per_slot > 1:
        value = str(agents.gpus_per_slot)
    widgets: list[Widget] = [
        Static(SHAPE_LABEL, classes="field-label shape-only"),
        Input(value=value, id="gpu-shape", classes="shape-only", placeholder="1"),
        Static("", id="gpu-topology", classes="hint shape-only", markup=False),
    ]
    for widget in widgets:
        widget.display = False  # until the host is read: most hosts have no shape to offer
        yield widget


def topology_words(topology: HostTopology) -> str:
    """``NVLink: 0-2, 1-3 · MIG: 3 × 1g.10gb, 1 × 3g.40gb`` (what the shape can use)."""
    parts = []
    if topology.nvlinks:
        parts.append("NVLink: " + ", ".join(f"{a}-{b}" for a, b in sorted(topology.nvlinks)))
    elif len(topology.gpus) > 1:
        parts.append("no NVLink between the GPUs")
    if topology.mig:
        counts = Counter(m.profile or "?" for m in topology.mig)
        parts.append("MIG: " + ", ".join(f"{n} × {p}" for p, n in sorted(counts.items())))
    return " · ".join(parts)


async def show_shapes(step: Step) -> None:
    """Read the topology once and show the shape field where the hardware has a shape."""
    from gpuci_tui.core.gpu.nvml_topology import topology_reader  # noqa: PLC0415 - pynvml

    if step.draft.topology is None:
        try:
            step.draft.topology = await step.wizard.in_thread(topology_reader(step.services.gpu))
        except Exception:  # noqa: BLE001 - no topology only means no shape to offer
            step.draft.topology = HostTopology()
    topology = step.draft.topology
    offered = len(topology.gpus) > 1 or bool(topology.mig)
    for widget in step.query(".shape-only"):
        widget.display = offered
    step.query_one("#gpu-topology", Static).update(topology_words(topology))


def read_shape(step: Step, policy: str, count: int) -> tuple[str, int, str | None]:
    """(GPU policy, GPUs per agent, problem) from the shape field and the chosen policy."""
    from gpuci_tui.core.config.loader import ConfigError  # noqa: PLC0415
    from gpuci_tui.core.config.validate import validate_gpus_per_slot  # noqa: PLC0415

    field = step.query_one("#gpu-shape", Input)
    text = field.value.strip().lower()
    topology = step.draft.topology or HostTopology()
    if not field.display or text in ("", "1"):
        return policy, 1, None
    if text == "mig":
        try:
            mig_slots(topology, count)
        except ShapeError as exc:
            return policy, 1, f"GPUs per agent: {exc}"
        return "mig", 1, None
    try:
        per_slot = validate_gpus_per_slot(int(text) if text.isdigit() else text)
    except ConfigError as exc:
        return policy, 1, config_problem("GPUs per agent", exc) + ', or "mig"'
    if policy != "per-agent":
        return policy, 1, f'{per_slot} GPUs per agent needs "per-agent" above: choose it'
    try:
        gpu_slots(topology, count, per_slot)
    except ShapeError as exc:
        return policy, 1, f"GPUs per agent: {exc}"
    return policy, per_slot, None


__all__ = ["SHAPE_LABEL", "read_shape", "shape_fields", "show_shapes", "topology_words"]
