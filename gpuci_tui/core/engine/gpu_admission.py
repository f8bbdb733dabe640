"""GPU admission: may a slot's agent take the next job on this GPU, given who else uses it?

The rule is per agent group (``gpu_admission`` in ``[agents]`` or ``[groups.NAME]``):

* ``"exclusive"`` (the default): no compute process outside gpuci-tui's own
  agent containers on the GPU;
* a table ``{ foreign_memory_max = "8GiB", foreign_util_max = 20 }``: the
  processes that are not ours may hold at most that much GPU memory (summed)
  and that much SM utilisation (percent, summed);
* ``"off"``: every GPU passes.

`verdict` is pure: it reads one `GpuSample` and a predicate that says which
processes are ours (the caller knows our containers), and returns why the GPU
does not pass, or None. The text names the biggest foreign process, so an
operator knows whom to ask ("GPU 0 used by pid 4242 python, 61 GB, not ours").

The rule's value lives here; reading it from ``config.toml`` (and the errors a
wrong value gets) is `config.admission`'s, so the engine never imports config.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from gpuci_tui.core.engine.gpu_health import Fault, HealthBook
from gpuci_tui.core.formatting import memory_gb
from gpuci_tui.core.gpu_readings import GpuFrame, GpuProcess, GpuSample

EXCLUSIVE = "exclusive"
OFF = "off"
LIMITS = "limits"


@dataclass(frozen=True)
class GpuAdmission:
    """One group's admission rule (see the module docstring)."""

    mode: str = EXCLUSIVE
    """``exclusive``, ``limits`` or ``off``."""
    foreign_memory_max_mib: float | None = None
    """With ``limits``: most GPU memory (MiB) processes not ours may hold (None: any)."""
    foreign_memory_max_text: str = ""
    """The limit as written (``"8GiB"``), kept so the file is written back the same."""
    foreign_util_max: float | None = None
    """With ``limits``: most SM utilisation (percent) processes not ours may use (None: any)."""

    def to_toml(self) -> object:
        """The value written to ``config.toml`` (the inverse of `config.admission`'s parser)."""
        if self.mode != LIMITS:
            return self.mode
        table: dict[str, object] = {}
        if self.foreign_memory_max_mib is not None:
            table["foreign_memory_max"] = self.foreign_memory_max_text
        if self.foreign_util_max is not None:
            util = self.foreign_util_max
            table["foreign_util_max"] = int(util) if util.is_integer() else util
        return table

    def describe(self) -> str:
        """The rule in words (``check-config``, ``status``)."""
        if self.mode == OFF:
            return "off (jobs start whatever else runs on the GPUs)"
        if self.mode == EXCLUSIVE:
            return "exclusive (no process outside gpuci-tui's containers on the slot's GPUs)"
        parts = []
        if self.foreign_memory_max_mib is not None:
            parts.append(f"at most {self.foreign_memory_max_text} of GPU memory")
        if self.foreign_util_max is not None:
            parts.append(f"at most {self.foreign_util_max:g} % utilisation")
        return "others may use " + " and ".join(parts)


# --------------------------------------------------------------------------- the verdict


def _who(process: GpuProcess) -> str:
    name = f" {process.name}" if process.name else ""
    memory = (
        f", {memory_gb(process.used_memory_mib)}" if process.used_memory_mib is not None else ""
    )
    where = f" in container {process.container_name}" if process.container_name else ""
    return f"pid {process.pid}{name}{where}{memory}"


def verdict(gpu: GpuSample, rule: GpuAdmission, ours: Callable[[GpuProcess], bool]) -> str | None:
    """Why ``gpu`` does not pass ``rule`` now, or None when it passes.

    Args:
        gpu: The GPU in the latest frame.
        rule: The group's admission rule.
        ours: Whether a process belongs to one of gpuci-tui's own containers.
    """
    if rule.mode == OFF:
        return None
    foreign = [p for p in gpu.processes if not ours(p)]
    if not foreign:
        return None
    foreign.sort(key=lambda p: -(p.used_memory_mib or 0.0))
    memory = sum(p.used_memory_mib or 0.0 for p in foreign)
    more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
    who = f"GPU {gpu.index} used by {_who(foreign[0])}{more}, not ours"
    if rule.mode == EXCLUSIVE:
        return who
    limit_mib = rule.foreign_memory_max_mib
    if limit_mib is not None and memory > limit_mib:
        return f"{who} ({memory_gb(memory)} > {rule.foreign_memory_max_text} allowed)"
    if rule.foreign_util_max is not None:
        utils = [p.sm_util_pct for p in foreign]
        if all(u is not None for u in utils):
            util: float | None = sum(u for u in utils if u is not None)
        else:
            # No per-process figure: the GPU's own figure, less nothing we can tell apart.
            util = gpu.utilization_pct if len(foreign) == len(gpu.processes) else None
        if util is not None and util > rule.foreign_util_max:
            return f"{who} ({util:.0f} % > {rule.foreign_util_max:g} % allowed)"
    return None


# --------------------------------------------------------------------------- a slot's gate


class GateKind(StrEnum):
    """Whether a slot's agent may take the next job, as far as its GPUs go."""

    OPEN = "open"
    HELD = "held"
    """A GPU does not pass the admission rule: the agent waits, disabled, still registered."""
    QUARANTINED = "quarantined"
    """A GPU is failing: held, and the slot is not replenished until the fault ends or is cleared."""


#: The bounded ``reason`` label of a held slot whose GPU someone else uses.
FOREIGN_PROCESS = "foreign_process"
#: The bounded ``reason`` label of a slot held because the driver cannot run its image.
CUDA_INCOMPATIBLE = "cuda_incompatible"


@dataclass(frozen=True)
class GateReading:
    """What the latest GPU frame says of one slot's GPUs."""

    kind: GateKind = GateKind.OPEN
    reason: str = ""
    code: str = ""
    """Bounded: ``foreign_process`` or a `gpu_health.Fault` value."""
    xids: tuple[int, ...] = ()
    """Critical Xids its GPUs raised in this frame."""


def slot_reading(
    gpus: str | tuple[str, ...],
    frame: GpuFrame,
    book: HealthBook,
    rule: GpuAdmission,
    ours: Callable[[GpuProcess], bool],
    xids: tuple[tuple[int, int], ...] = (),
) -> GateReading:
    """The gate of a slot given ``gpus`` (``"all"``, ``"none"`` or ids: indexes or UUIDs)."""
    if gpus == "none":
        return GateReading()
    if book.driver is not None:
        return GateReading(GateKind.QUARANTINED, book.driver.reason, book.driver.code.value)
    if not frame.host.available:
        return GateReading()
    samples: list[GpuSample] = []
    missing: list[str] = []
    if isinstance(gpus, str):
        samples = list(frame.gpus)
    else:
        for gpu_id in gpus:
            sample = next((g for g in frame.gpus if gpu_id in (str(g.index), g.uuid)), None)
            if sample is None:
                missing.append(gpu_id)
            else:
                samples.append(sample)
    indexes = {g.index for g in samples}
    mine = tuple(xid for index, xid in xids if index in indexes)
    faults = [f for g in samples for f in book.faults_of(g.index)]
    if faults:
        more = f" (and {len(faults) - 1} more)" if len(faults) > 1 else ""
        return GateReading(
            GateKind.QUARANTINED, faults[0].reason + more, faults[0].code.value, mine
        )
    if missing:
        reason = f"GPU {missing[0]} is not seen by the driver"
        return GateReading(GateKind.HELD, reason, Fault.LOST.value, mine)
    for gpu in samples:
        why = verdict(gpu, rule, ours)
        if why is not None:
            return GateReading(GateKind.HELD, why, FOREIGN_PROCESS, mine)
    return GateReading(xids=mine)
