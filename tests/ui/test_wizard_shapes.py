"""The wizard offers GPUs per agent and MIG slices where the hardware has them."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import RadioButton

from gpuci_tui.core.config.loader import load_config
from gpuci_tui.core.config.slot_shapes import HostTopology, MigDevice
from gpuci_tui.screens.dashboard import DashboardScreen
from tests.ui.fakes import FakeSampler
from tests.ui.helpers import text_of, wait_for
from tests.ui.wizard_harness import wizard

#: The fake frame's four GPUs, NVLink-joined in pairs 0-2 and 1-3; GPU 0 has two MIG slices.
TOPOLOGY = HostTopology(
    gpus=(0, 1, 2, 3),
    nvlinks=frozenset({(0, 2), (1, 3)}),
    mig_mode=frozenset({0}),
    mig=(MigDevice(0, 0, "MIG-a", "1g.10gb", 9856), MigDevice(0, 1, "MIG-b", "1g.10gb", 9856)),
)


class TopologySampler(FakeSampler):
    """A sampler that knows its host's NVLink pairs and MIG devices."""

    def __init__(self, topology: HostTopology) -> None:
        super().__init__()
        self._topology = topology

    def topology(self) -> HostTopology:
        return self._topology


async def test_the_shape_field_is_hidden_without_a_shape_to_offer(tmp_path: Path) -> None:
    async with wizard(tmp_path, sampler=TopologySampler(HostTopology(gpus=(0,)))) as w:
        await w.through(4)
        await wait_for(w.pilot, lambda: w.wizard.draft.topology is not None, what="the topology")
        assert not w.field("#gpu-shape").display


async def test_gpus_per_agent_are_checked_against_the_topology_and_saved(tmp_path: Path) -> None:
    async with wizard(tmp_path, sampler=TopologySampler(TOPOLOGY)) as w:
        await w.through(4)
        await wait_for(w.pilot, lambda: w.field("#gpu-shape").display, what="the shape field")
        assert text_of(w.wizard, "#gpu-topology") == "NVLink: 0-2, 1-3 · MIG: 2 × 1g.10gb"
        await w.fill("#count", "3")
        await w.fill("#gpu-shape", "2")
        await w.next()
        assert w.message == '2 GPUs per agent needs "per-agent" above: choose it'
        w.wizard.query_one("#gpus-per-agent", RadioButton).value = True
        await w.next()
        assert w.message == (
            "GPUs per agent: 3 slots of 2 GPUs need 6 GPUs, but there are 4 GPUs; "
            "lower count to 2 or gpus_per_slot"
        )
        await w.fill("#count", "2")
        await w.next()
        await w.next()
        await w.at(6)
        assert "per-agent, 2 per agent" in text_of(w.wizard, "#review")
        await w.pilot.press("enter")
        await wait_for(
            w.pilot, lambda: isinstance(w.app.screen, DashboardScreen), what="the dashboard"
        )
        agents = load_config(w.config_path).agents
        assert (agents.gpus, agents.gpus_per_slot, agents.count) == ("per-agent", 2, 2)


async def test_mig_makes_one_agent_per_slice(tmp_path: Path) -> None:
    async with wizard(tmp_path, sampler=TopologySampler(TOPOLOGY)) as w:
        await w.through(4)
        await wait_for(w.pilot, lambda: w.field("#gpu-shape").display, what="the shape field")
        await w.fill("#count", "3")
        await w.fill("#gpu-shape", "mig")
        await w.next()
        assert w.message == (
            "GPUs per agent: count is 3, but this host has 2 MIG devices; lower count to 2"
        )
        await w.fill("#count", "2")
        await w.next()
        await w.at(5)
        assert (w.wizard.draft.gpu_policy, w.wizard.draft.count) == ("mig", 2)
