"""Per-job GPU facts beyond use: throttle seconds by reason, ECC errors, peak temperature.

DCGM's job statistics keep, per job, the clock-throttle time, the ECC and Xid
events and the temperature; NVIDIA says to export them to a durable store,
and the job history is ours. These facts cost no extra NVML call worth
counting: the clocks-event reasons, the temperature and the uncorrected ECC
counter are already read in every sample (`health_reader`); only the
corrected ECC counter is new, 0.003 ms a call on an H100 (shared/gpu-h100),
and read only for a GPU that runs a process.
The energy counter (~3.4 ms a call) stays with `accounting`, which reads it
only while a job's process runs. Xids during the job come from the engine
(`LaneRecord.xids`), not from here.

Rules, as in `accounting`, so that a number shown is the job's:

- A `FactsWindow` follows one job on one GPU from the first sample in which
  the job's process was seen there until the job finishes: every frame
  folded meanwhile counts, also one in which the process is between two
  steps (the GPU is the slot's while its container runs).
- Throttle seconds: each folded frame's reasons are credited with the time
  since the previous frame of that window, at most ``max_gap`` seconds (a
  stalled sampler must not turn one reading into minutes). The first frame
  credits nothing. Summed over the job's GPUs (GPU-seconds). Idle (0x1) and
  the display/application clock settings are not throttling and are not kept.
- ECC: the volatile counters' increase between the window's first and last
  frame, summed over the GPUs; a counter that went down (driver reloaded)
  makes the figure None, as does a GPU whose counter never answered.
- None always means "not known", never zero: a board without clocks-event
  reasons has None throttle seconds, not an empty mapping.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpuci_tui.core.gpu_readings import GpuSample

THROTTLE_BITS: tuple[tuple[str, int], ...] = (
    ("sw_power_cap", 0x4),
    ("hw_slowdown", 0x8),
    ("sync_boost", 0x10),
    ("sw_thermal", 0x20),
    ("hw_thermal", 0x40),
    ("hw_power_brake", 0x80),
)
"""NVML's clocks-event (throttle) reasons that slow a running job down, by name."""

SHORT_NAMES = {
    "sw_power_cap": "power",
    "hw_slowdown": "hw slowdown",
    "sync_boost": "sync boost",
    "sw_thermal": "thermal",
    "hw_thermal": "hw thermal",
    "hw_power_brake": "power brake",
}
"""How the history screen and ``gpuci-tui history`` name each reason."""


@dataclass(frozen=True)
class JobFacts:
    """What the GPUs went through during one job; None: not known."""

    throttle_s: tuple[tuple[str, float], ...] | None = None
    """Seconds per throttle reason (`THROTTLE_BITS` names), summed over the GPUs; only
    reasons that were seen; empty: read and never throttled."""
    ecc_corrected: int | None = None
    """Corrected ECC errors during the job (volatile counter increase)."""
    ecc_uncorrected: int | None = None
    """Uncorrectable ECC errors during the job."""
    peak_temp_c: float | None = None
    """The hottest any of the job's GPUs was in a folded frame."""


@dataclass
class FactsWindow:
    """One job on one GPU: the facts folded so far (see the module rules)."""

    last_at: float | None = None
    throttle: dict[str, float] = field(default_factory=dict)
    throttle_read: bool = False
    ecc_first: list[int | None] = field(default_factory=lambda: [None, None])
    ecc_last: list[int | None] = field(default_factory=lambda: [None, None])
    ecc_reset: list[bool] = field(default_factory=lambda: [False, False])
    peak_temp: float | None = None

    def fold(self, gpu: GpuSample, now: float, max_gap: float) -> None:
        """Fold one frame of this GPU taken at ``now``."""
        health = gpu.health
        since = self.last_at
        self.last_at = now
        if gpu.temperature_c is not None:
            self.peak_temp = max(self.peak_temp or gpu.temperature_c, gpu.temperature_c)
        if health is None:
            return
        mask = health.clocks_event_mask
        if mask is not None:
            self.throttle_read = True
            step = min(max(0.0, now - since), max_gap) if since is not None else 0.0
            for name, bit in THROTTLE_BITS:
                if mask & bit and step > 0:
                    self.throttle[name] = self.throttle.get(name, 0.0) + step
        for i, value in enumerate((health.ecc_corrected_volatile, health.ecc_uncorrected_volatile)):
            if value is None:
                continue
            if self.ecc_first[i] is None:
                self.ecc_first[i] = value
            last = self.ecc_last[i]
            if last is not None and value < last:
                self.ecc_reset[i] = True
            self.ecc_last[i] = value

    def ecc(self, i: int) -> int | None:
        """Counter ``i``'s increase (0 corrected, 1 uncorrected); None: not known."""
        first, last = self.ecc_first[i], self.ecc_last[i]
        if first is None or last is None or self.ecc_reset[i]:
            return None
        return last - first


def combine(windows: Iterable[FactsWindow]) -> JobFacts:
    """The job's facts from its windows (one per GPU)."""
    windows = list(windows)
    if not windows:
        return JobFacts()
    throttle: dict[str, float] | None = None
    if any(w.throttle_read for w in windows):
        throttle = {}
        for w in windows:
            for name, seconds in w.throttle.items():
                throttle[name] = throttle.get(name, 0.0) + seconds
    ecc: list[int | None] = []
    for i in (0, 1):
        values = [w.ecc(i) for w in windows]
        ecc.append(None if any(v is None for v in values) else sum(v or 0 for v in values))
    temps = [w.peak_temp for w in windows if w.peak_temp is not None]
    return JobFacts(
        throttle_s=_ordered(throttle) if throttle is not None else None,
        ecc_corrected=ecc[0],
        ecc_uncorrected=ecc[1],
        peak_temp_c=max(temps) if temps else None,
    )


def _ordered(throttle: dict[str, float]) -> tuple[tuple[str, float], ...]:
    order = [name for name, _ in THROTTLE_BITS]
    return tuple(sorted(throttle.items(), key=lambda kv: order.index(kv[0])))


def throttle_to_json(value: tuple[tuple[str, float], ...] | None) -> str | None:
    """The history column's text: a JSON object of reason → seconds (None stays NULL)."""
    if value is None:
        return None
    return json.dumps({name: round(seconds, 1) for name, seconds in value})


def throttle_from_json(text: object) -> tuple[tuple[str, float], ...] | None:
    """Read the history column back; anything unreadable is None (not known)."""
    if not isinstance(text, str):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return tuple(
        (str(k), float(v)) for k, v in data.items() if isinstance(v, int | float) and v >= 0
    )


def summary(
    energy_j: float | None,
    throttle_s: tuple[tuple[str, float], ...] | None,
    ecc: tuple[int | None, int | None],
    xids: tuple[int, ...],
    peak_temp_c: float | None,
) -> str:
    """One compact line of a job's GPU facts: "412 kJ · thermal 12 s · ECC 1 · Xid 79 · 83 °C".

    Unknown facts are left out; so are zero throttle reasons and zero ECC counts.
    """
    parts: list[str] = []
    if energy_j is not None:
        parts.append(_energy(energy_j))
    for name, seconds in throttle_s or ():
        if seconds >= 0.5:
            parts.append(f"{SHORT_NAMES.get(name, name)} {seconds:.0f} s")
    corrected, uncorrected = ecc
    if uncorrected:
        parts.append(f"ECC {uncorrected} uncorrected")
    if corrected:
        parts.append(f"ECC {corrected} corrected")
    if xids:
        parts.append("Xid " + ",".join(str(x) for x in xids))
    if peak_temp_c is not None:
        parts.append(f"{peak_temp_c:.0f} °C")
    return " · ".join(parts)


def _energy(joules: float) -> str:
    if joules >= 1e6:
        return f"{joules / 1e6:.1f} MJ"
    if joules >= 1e3:
        return f"{joules / 1e3:.0f} kJ"
    return f"{joules:.0f} J"
