"""The demo's past: a job history with trends to look at from the first second.

A real host's history view shows weeks of jobs; a new demo has none. The demo
writes `SEEDED_RUNS` past jobs of the simulated pipelines before it starts
(`seed_history`), so the history view and ``gpuci-tui history`` have rows, a
failure now and then, hot GPUs and a memory regression to spot.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuci_tui.core.store.history import JobHistory

__all__ = ["SEEDED_RUNS", "seed_history"]

SEEDED_RUNS = 60
"""Past jobs written to the demo's history at start, so the history view has trends at once."""


def seed_history(
    history: JobHistory, instance: str, now: float, *, prefix: str, seed: int = 7
) -> None:
    """Write `SEEDED_RUNS` past jobs of the simulated pipelines (the last few hours).

    Each pipeline has its own typical memory and duration with some noise, and
    'train - main' creeps up over its last runs, so the trend view shows what
    a regression looks like.
    """
    from gpuci_tui.core.store.history import JobRecord
    from gpuci_tui.sim.container import sim_image_id
    from gpuci_tui.sim.jobs import PIPELINES
    from gpuci_tui.sim.runtime import DEFAULT_IMAGE

    rng = random.Random(seed)
    typical = {name: (8.0 + 12.0 * i, 300.0 + 240.0 * i) for i, name in enumerate(PIPELINES)}
    for n in range(SEEDED_RUNS):
        pipeline = PIPELINES[n % len(PIPELINES)]
        memory_gib, seconds = typical[pipeline]
        if pipeline == "train - main":
            memory_gib += max(0, n - SEEDED_RUNS // 2) * 0.6  # the regression to spot
        ended = now - (SEEDED_RUNS - n) * 240.0
        failed = rng.random() < 0.08
        duration = seconds * rng.uniform(0.85, 1.15)
        # The GPU facts draw from their own generator: the rest of the seeded history stays.
        gpu = random.Random(seed * 10_000 + n)
        hot = gpu.random() < 0.15  # now and then a job that heats its GPU into slowing down
        throttle: tuple[tuple[str, float], ...] = (
            ("sw_power_cap", duration * gpu.uniform(0, 0.3)),
        )
        throttle += (("sw_thermal", duration * gpu.uniform(0.02, 0.1)),) if hot else ()
        history.add(
            JobRecord(
                instance=instance, slot=n % 4, agent=f"{prefix}-{n % 4}",
                request_id=100_000 + n, pipeline=pipeline, run=f"demo.{n + 1}",
                started_at=ended - duration - 5, ended_at=ended,
                exit_code=1 if failed else 0, oom=False, reason="job finished",
                result="failed" if failed else "succeeded", queue_wait_s=rng.uniform(0, 20),
                duration_s=duration, gpus=(n % 4,), gpu_samples=int(duration),
                peak_gpu_memory_mib=memory_gib * rng.uniform(0.95, 1.05) * 1024,
                mean_util_pct=rng.uniform(55, 95), peak_util_pct=rng.uniform(90, 100),
                image=DEFAULT_IMAGE, image_id=sim_image_id(DEFAULT_IMAGE),
                energy_j=duration * gpu.uniform(250, 650), throttle_s=throttle, ecc_corrected=0,
                ecc_uncorrected=0, peak_temp_c=gpu.uniform(84, 89) if hot else gpu.uniform(55, 75),
            )
        )  # fmt: skip
