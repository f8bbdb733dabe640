"""The daemon's GPU sampling loop: one NVML sweep per interval, folded into per-job accounting.

Every agent container of the supervisor is a candidate owner (an agent runs
at most one job, so a container *is* a job); the key of a container's job is
its lane's agent name, so the job is found again when its container exits
(`core.gpu.accounting.key_of`). The latest frame is kept for the metrics endpoint; the same frame feeds the
`GpuGatekeeper` (admission and health of each slot's GPUs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from gpuci_tui.core.gpu.accounting import JobAccountant, JobKey
from gpuci_tui.core.gpu_readings import GpuFrame
from gpuci_tui.core.host.gpus.cuda_guard import CudaGuard
from gpuci_tui.core.host.gpus.gates import GpuGatekeeper
from gpuci_tui.core.protocols import GpuSampler

log = logging.getLogger("gpuci_tui.gpu")


class GpuWatch:
    """Samples the GPUs every ``interval`` seconds and feeds the accountant."""

    def __init__(
        self,
        sampler: GpuSampler,
        accountant: JobAccountant,
        owners: Callable[[], Mapping[str, JobKey]],
        *,
        interval: float,
        gatekeeper: GpuGatekeeper | None = None,
        cuda: CudaGuard | None = None,
    ) -> None:
        """Watch with ``sampler``; ``owners`` gives the current container → job map.

        ``gatekeeper`` (admission and health) is fed the same frame: one NVML pass for both;
        so is ``cuda`` (the driver each frame reports, against the groups' images).
        """
        self.sampler = sampler
        self.accountant = accountant
        self.owners = owners
        self.interval = interval
        self.latest: GpuFrame | None = None
        self.gatekeeper = gatekeeper
        self.cuda = cuda
        self._absent: dict[JobKey, int] = {}

    async def run(self) -> None:
        """Sample until cancelled."""
        while True:
            await self.sample_once()
            await asyncio.sleep(self.interval)

    async def sample_once(self) -> None:
        """One sweep: sample, fold, forget jobs whose container is gone."""
        try:
            frame = await asyncio.to_thread(self.sampler.sample)
        except Exception:  # noqa: BLE001 - a sampler bug must not stop the daemon
            log.exception("GPU sampling failed")
            # The live agents table must not go on showing the last good frame's figures.
            self.accountant.clear_current()
            return
        self.latest = frame
        owners = self.owners()
        self.accountant.observe(frame, owners)
        if self.gatekeeper is not None:
            self.gatekeeper.observe(frame, owners)
        if self.cuda is not None:
            await self.cuda.observe(frame.host)
        live = set(owners.values())
        for key in self.accountant.jobs():
            if key in live:
                self._absent.pop(key, None)
                continue
            # A job whose container exited is finished by the recorder at once; one
            # still here two sweeps later exited without a job: nothing to record.
            self._absent[key] = self._absent.get(key, 0) + 1
            if self._absent[key] >= 2:
                self.accountant.discard(key)
                del self._absent[key]
