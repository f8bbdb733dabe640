"""One agent group's slots and the host's GPUs: what each slot watches, its gate readings.

The host's `GpuGatekeeper` samples the GPUs once for every group and hands each
group's supervisor the frame (`gpu_gates.GateFeed`). `SlotGpus` is the supervisor's
side of it: which GPUs a slot watches (a MIG slot watches its parent GPU), each
slot's gate reading under the group's admission rule, and when the engine hears of
it (every frame while a gate is closed, since a flapping GPU's hold-down counts
frames; otherwise only on a change, so an all-clear host costs nothing per sample).
It also finds what a busy slot's job uses of the GPUs now, for the snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from gpuci_tui.core.config.loader import Config
from gpuci_tui.core.docker.slot_devices import watched_gpus, watched_ids
from gpuci_tui.core.engine.gpu_admission import GateReading, slot_reading
from gpuci_tui.core.engine.lifecycle import SlotRecord
from gpuci_tui.core.engine.steps import GpuObserved
from gpuci_tui.core.gpu.accounting import key_of

if TYPE_CHECKING:
    from gpuci_tui.core.engine.gpu_health import HealthBook
    from gpuci_tui.core.gpu.accounting import JobKey
    from gpuci_tui.core.gpu_readings import GpuFrame, JobGpuNow
    from gpuci_tui.core.host.gpus.gates import Ours


class SlotGpus:
    """The GPUs of one group's slots, as its supervisor reads them (see the module docstring).

    Args:
        instance: the supervisor's instance id (a job is keyed by instance, slot and agent).
        clock: the supervisor's wall clock (the time of an observation).
        gpu_use: what a job uses of the GPUs now (the daemon's `JobAccountant.current`);
            None when GPUs are not sampled.
    """

    def __init__(
        self,
        instance: str,
        clock: Callable[[], float],
        gpu_use: Callable[[JobKey], JobGpuNow | None] | None = None,
    ) -> None:
        self.instance = instance
        self.clock = clock
        self.gpu_use = gpu_use
        self.readings: tuple[tuple[int, GateReading], ...] = ()
        """(slot, its gate reading) as the engine last heard them."""

    @staticmethod
    def ids(config: Config, slot: int) -> tuple[str, ...]:
        """The GPU ids slot ``slot`` watches (a MIG slot's parent GPU; ``all`` for every GPU)."""
        return watched_ids(config, slot)

    def used(self, config: Config, slots: Iterable[SlotRecord]) -> set[str]:
        """Every GPU id the slots use (``all`` for every GPU)."""
        return {gpu for slot in slots for gpu in self.ids(config, slot.number)}

    def job_now(self, slot: int, agent: str) -> JobGpuNow | None:
        """What the job of ``agent`` on ``slot`` uses of the GPUs now (None: not known)."""
        if self.gpu_use is None:
            return None
        # The accountant keys a job by the agent that runs it (see accounting.key_of).
        return self.gpu_use(key_of(self.instance, slot, agent))

    def observation(
        self,
        config: Config,
        slots: tuple[SlotRecord, ...],
        frame: GpuFrame,
        book: HealthBook,
        xids: tuple[tuple[int, int], ...],
        ours: Ours,
        cleared: frozenset[str],
    ) -> GpuObserved | None:
        """The slots' gates in ``frame`` for the engine, or None when it need not hear of it.

        ``cleared``: GPUs (index, UUID or ``all``) an operator has just cleared.
        """
        rule = config.agents.gpu_admission
        readings = tuple(
            (
                slot.number,
                slot_reading(watched_gpus(config, slot.number), frame, book, rule, ours, xids),
            )
            for slot in slots
        )
        # Every frame while a gate is closed (a flapping GPU's hold-down counts frames);
        # otherwise only a change, so an all-clear host costs nothing per sample.
        closed = any(slot.gate.closed for slot in slots)
        if readings == self.readings and not closed:
            return None
        self.readings = readings
        # A slot is concerned when it uses a cleared GPU, or every GPU ("all" on either side).
        mine = frozenset(
            slot.number
            for slot in slots
            if cleared
            and ("all" in cleared or {"all", *cleared} & set(self.ids(config, slot.number)))
        )
        return GpuObserved(self.clock(), readings, config.agents.gpu_hold_down, cleared=mine)
