"""GPU samplers that need no GPU: `SyntheticSampler` (demo) and `FixtureSampler` (tests).

`SyntheticSampler` makes plausible, changing numbers for the demo: utilisation
follows a random walk pulled towards "working hard" while the agent on that GPU
is busy and towards idle otherwise; memory, temperature and power follow the
load with the lag real boards show. `FixtureSampler` replays recorded frames
one per `sample()` call, for deterministic UI tests and screenshots.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuci_tui.core.gpu.capabilities import GpuFacts, HostGpuFacts
from gpuci_tui.core.gpu_readings import GpuFrame, GpuHostInfo, GpuProcess, GpuSample
from gpuci_tui.core.protocols import GpuSampler
from gpuci_tui.core.wire import from_dict, to_dict


@dataclass(frozen=True)
class GpuModel:
    """The fixed facts of a simulated board."""

    name: str
    memory_mib: float
    """Total memory as NVML reports it (slightly below the marketing size)."""
    power_limit_w: float
    idle_power_w: float
    compute_capability: tuple[int, int] | None = None
    mig_capable: bool | None = None


MODELS: dict[str, GpuModel] = {
    "a6000": GpuModel("NVIDIA RTX A6000", 49140.0, 300.0, 22.0, (8, 6), False),
    "l40s": GpuModel("NVIDIA L40S", 46068.0, 350.0, 34.0, (8, 9), False),
    "l4": GpuModel("NVIDIA L4", 23034.0, 72.0, 16.0, (8, 9), False),
    "a100": GpuModel("NVIDIA A100 80GB PCIe", 81920.0, 300.0, 45.0, (8, 0), True),
    "h100": GpuModel("NVIDIA H100 80GB HBM3", 81559.0, 700.0, 70.0, (9, 0), True),
}
"""Boards the demo can pretend to have (``SyntheticSampler(model=...)``)."""

SYNTHETIC_DRIVER = "580.82.07"
SYNTHETIC_CUDA = (13, 0)

Owner = Callable[[int], "tuple[str | None, str | None] | None"]
"""``owner(gpu_index) -> (container_id, container_name)`` of the job using that GPU."""


@dataclass
class _GpuState:
    util: float
    mem_used: float
    temp: float
    power: float
    working_set: float
    """Memory the current job settles at (picked when the GPU turns busy)."""
    was_busy: bool = False


class SyntheticSampler:
    """A pretend GPU host for the demo; implements `GpuSampler`."""

    def __init__(
        self,
        gpus: int = 4,
        *,
        seed: int | None = None,
        busy: Callable[[int], bool] | None = None,
        owner: Owner | None = None,
        model: str | GpuModel = "a6000",
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Create ``gpus`` simulated boards.

        Args:
            gpus: How many GPUs; 0 simulates a host without any.
            seed: Seed for reproducible numbers (None: different every run).
            busy: ``busy(index)`` says whether the agent using GPU ``index`` is
                running a job right now; busy GPUs work hard, others idle.
                Without it every GPU idles.
            owner: ``owner(index)`` names the container of the job on GPU
                ``index``, so the console can tie the GPU process to its agent.
            model: A key of `MODELS` or a `GpuModel`.
            clock: Wall clock for `GpuFrame.taken_at`.
        """
        self._model = MODELS[model] if isinstance(model, str) else model
        self._rng = random.Random(seed)
        self._busy = busy
        self._owner = owner
        self._clock = clock
        self._lock = threading.Lock()
        self._states = [
            _GpuState(
                util=0.0,
                mem_used=4.0,
                temp=self._rng.uniform(30.0, 36.0),
                power=self._model.idle_power_w,
                working_set=0.0,
            )
            for _ in range(gpus)
        ]

    def host_info(self) -> GpuHostInfo:
        """The simulated driver (580.82.07, CUDA 13.0)."""
        if not self._states:
            return GpuHostInfo(
                available=False,
                reason="The NVIDIA driver is loaded but sees no GPU.",
                driver_version=SYNTHETIC_DRIVER,
                cuda_driver_version=SYNTHETIC_CUDA,
            )
        return GpuHostInfo(
            available=True,
            driver_version=SYNTHETIC_DRIVER,
            cuda_driver_version=SYNTHETIC_CUDA,
            gpu_count=len(self._states),
        )

    def sample(self) -> GpuFrame:
        """Advance the simulation one step and return the frame."""
        with self._lock:
            gpus = tuple(self._step(index, state) for index, state in enumerate(self._states))
            return GpuFrame(taken_at=self._clock(), host=self.host_info(), gpus=gpus)

    def close(self) -> None:
        """Nothing to release."""

    def facts(self) -> HostGpuFacts:
        """The boards' fixed facts, as `nvml_facts` reads them from a real host."""
        m = self._model
        gpus = tuple(
            GpuFacts(
                index,
                f"GPU-{self._uuid_suffix(index)}",
                m.name,
                int(m.memory_mib),
                m.compute_capability,
                m.mig_capable,
            )
            for index in range(len(self._states))
        )
        return HostGpuFacts(SYNTHETIC_DRIVER, SYNTHETIC_CUDA, gpus)

    def _is_busy(self, index: int) -> bool:
        if self._busy is None:
            return False
        try:
            return bool(self._busy(index))
        except Exception:  # noqa: BLE001 - a demo callback must not break sampling
            return False

    def _step(self, index: int, s: _GpuState) -> GpuSample:
        rng, model = self._rng, self._model
        busy = self._is_busy(index)
        if busy and not s.was_busy:
            s.working_set = rng.uniform(0.35, 0.9) * model.memory_mib
        s.was_busy = busy

        # Utilisation: mean-reverting random walk towards the load's level, so
        # a busy GPU hovers in the 80s-90s with dips (data loading), an idle one near 0.
        target = rng.uniform(75.0, 100.0) if busy else 0.0
        s.util += (target - s.util) * 0.35 + rng.gauss(0.0, 6.0 if busy else 0.4)
        s.util = min(100.0, max(0.0, s.util))

        # Memory: ramps towards the job's working set, drops when the job ends.
        mem_target = s.working_set if busy else 4.0
        s.mem_used += (mem_target - s.mem_used) * (0.25 if busy else 0.6)
        s.mem_used = min(
            model.memory_mib, max(0.0, s.mem_used + rng.gauss(0.0, 8.0 if busy else 0.0))
        )

        # Temperature lags the load (thermal mass); power follows it at once.
        temp_target = 32.0 + s.util * 0.5
        s.temp += (temp_target - s.temp) * 0.12 + rng.gauss(0.0, 0.3)
        power_target = (
            model.idle_power_w + (model.power_limit_w - model.idle_power_w) * s.util / 100
        )
        s.power = min(
            model.power_limit_w, max(0.0, power_target + rng.gauss(0.0, 4.0 if busy else 0.5))
        )

        processes: tuple[GpuProcess, ...] = ()
        if busy:
            cid, cname = (self._owner(index) if self._owner else None) or (None, None)
            processes = (
                GpuProcess(
                    pid=40000 + 97 * index,
                    used_memory_mib=float(round(max(0.0, s.mem_used - 2.0))),
                    name="python3",
                    container_id=cid,
                    container_name=cname,
                ),
            )
        return GpuSample(
            index=index,
            name=model.name,
            uuid=f"GPU-{self._uuid_suffix(index)}",
            utilization_pct=float(round(s.util)),
            memory_used_mib=float(round(s.mem_used)),
            memory_total_mib=model.memory_mib,
            temperature_c=float(round(s.temp)),
            power_w=round(s.power, 1),
            power_limit_w=model.power_limit_w,
            processes=processes,
        )

    @staticmethod
    def _uuid_suffix(index: int) -> str:
        # Stable, UUID-shaped and obviously synthetic.
        return f"5e1f0000-0000-4000-8000-{index:012d}"


class FixtureSampler:
    """Replays recorded frames: the n-th `sample()` returns the n-th frame.

    After the last frame it keeps returning the last one (``cycle=False``, the
    default, so a UI test that samples once more than expected stays stable)
    or starts over (``cycle=True``).
    """

    def __init__(self, frames: Sequence[GpuFrame], *, cycle: bool = False) -> None:
        """Create the sampler from frames in the order they are to be returned."""
        self._frames = tuple(frames)
        self._cycle = cycle
        self._next = 0
        self._lock = threading.Lock()
        self.samples_taken = 0
        """How many times `sample()` was called."""

    @classmethod
    def from_json(cls, path: str | Path, *, cycle: bool = False) -> FixtureSampler:
        """Load frames written by `save_frames` (a list, or ``{"frames": [...]}``).

        Raises:
            ValueError: the file is not valid JSON or a frame has the wrong shape.
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc})") from None
        items = data.get("frames") if isinstance(data, dict) else data
        if not isinstance(items, list):
            raise ValueError(f"{path}: expected a list of frames or {{'frames': [...]}}")
        return cls([from_dict(GpuFrame, item) for item in items], cycle=cycle)

    def host_info(self) -> GpuHostInfo:
        """The host info of the frame the next `sample()` returns."""
        with self._lock:
            if not self._frames:
                return GpuHostInfo(available=False, reason="No recorded GPU frames.")
            return self._frames[self._index()].host

    def sample(self) -> GpuFrame:
        """Return the next recorded frame."""
        with self._lock:
            self.samples_taken += 1
            if not self._frames:
                return GpuFrame(taken_at=0.0, host=GpuHostInfo(False, "No recorded GPU frames."))
            frame = self._frames[self._index()]
            self._next += 1
            return frame

    def close(self) -> None:
        """Nothing to release."""

    def _index(self) -> int:
        if self._cycle:
            return self._next % len(self._frames)
        return min(self._next, len(self._frames) - 1)


def save_frames(frames: Sequence[GpuFrame], path: str | Path) -> None:
    """Write frames as JSON that `FixtureSampler.from_json` reads back."""
    data = {"frames": [to_dict(frame) for frame in frames]}
    Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def record(sampler: GpuSampler, count: int, interval: float = 1.0) -> list[GpuFrame]:
    """Take ``count`` frames from any `GpuSampler`, ``interval`` seconds apart.

    Used to capture a real host's frames for a UI fixture:
    ``save_frames(record(NvmlSampler(), 30), "frames.json")``.
    """
    frames: list[GpuFrame] = []
    for i in range(count):
        if i:
            time.sleep(interval)  # pacing a recording, not synchronisation
        frames.append(sampler.sample())
    return frames
