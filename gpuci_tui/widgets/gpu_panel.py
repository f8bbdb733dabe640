"""One compact card per GPU: load, memory, temperature, power, history, processes.

The panel only renders `GpuFrame`s it is given (sampling happens in a thread
worker of the dashboard). It keeps a short utilisation history per GPU for the
sparkline and maps each GPU process to the agent slot whose container owns it
(from its ``snapshot``, which the dashboard binds to its own).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from rich.text import Text
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.reactive import var
from textual.widget import Widget
from textual.widgets import Static

from gpuci_tui.core.gpu.accounting import container_owners
from gpuci_tui.core.gpu_readings import GpuFrame, GpuProcess, GpuSample
from gpuci_tui.core.models import GpuGateSnapshot, SupervisorSnapshot
from gpuci_tui.widgets.format import NA, bar, gib, level_style, number, truncate

#: How a held or quarantined GPU is marked (the reason follows).
GATE_STYLES = {"held": "bold black on yellow", "quarantined": "bold white on red"}

HISTORY_SAMPLES = 180
"""Utilisation samples kept per GPU (3 minutes at the default 1 s interval)."""

_SPARK_LEVELS = "▁▂▃▄▅▆▇█"

# Cells of the compact line's fields (``80/80G``, ``100°C``, ``1000W``) and the
# room kept for the owners' names before the history takes the rest.
_MEM_CELLS = 7
_TEMP_CELLS = 5
_POWER_CELLS = 5
_OWNER_CELLS = 10


def owner_map(snapshot: SupervisorSnapshot) -> dict[str, str]:
    """Container name / id (full and 12-char) → agent name, for GPU processes (`container_owners`)."""
    owners: dict[str, str] = {}
    for container, key in container_owners(snapshot).items():
        owners[key.agent] = owners[container] = owners[container[:12]] = key.agent
    return owners


def slot_words(keys: list[str]) -> str:
    """``slot 2``, ``slots 0-1`` (a run of one group's numbers) or ``slots 0, 2, a/1``."""
    if len(keys) == 1:
        return f"slot {keys[0]}"
    numbers = [int(k) for k in keys if k.isdigit()]
    if len(numbers) == len(keys) and numbers == list(range(numbers[0], numbers[0] + len(keys))):
        return f"slots {numbers[0]}-{numbers[-1]}"
    return "slots " + ", ".join(keys)


def holders(snapshot: SupervisorSnapshot, samples: Iterable[GpuSample]) -> dict[int, list[str]]:
    """GPU index → which slots hold it: ``slots 0-1`` or one line per MIG slice.

    Only for slots shaped by the hardware (``gpus_per_slot``, MIG): there the
    planner chose the devices, so the operator cannot read them off the file.
    """
    ids = {sample.index: {str(sample.index), sample.uuid} for sample in samples}
    whole: dict[int, list[str]] = {}
    slices: dict[int, list[str]] = {}
    for slot in snapshot.slots:
        if not slot.devices:
            continue
        for index, names in ids.items():
            if not names & set(slot.gpus):
                continue
            if slot.devices.startswith("MIG"):
                slices.setdefault(index, []).append(f"{slot.devices} · slot {slot.key}")
            else:
                whole.setdefault(index, []).append(slot.key)
    return {
        index: ([f"GPU {index} · {slot_words(whole[index])}"] if index in whole else [])
        + slices.get(index, [])
        for index in sorted({*whole, *slices})
    }


def spark(values: Iterable[float | None], width: int) -> Text:
    """A sparkline on a fixed 0–100 scale, newest sample on the right.

    Textual's `Sparkline` scales between the data's own min and max, which turns
    a steady 50 % ± 1 into a saw-tooth; an operator needs the absolute level.
    """
    data = list(values)[-width:] if width > 0 else []
    text = Text(" " * (width - len(data)), no_wrap=True)
    for value in data:
        if value is None:
            text.append("·", style="bright_black")
            continue
        clamped = max(0.0, min(100.0, value))
        level = min(len(_SPARK_LEVELS) - 1, int(clamped / 100.0 * len(_SPARK_LEVELS)))
        text.append(_SPARK_LEVELS[level], style=level_style(clamped))
    return text


class GpuCard(Widget):
    """One GPU: a header line, two bar lines, its history and its processes."""

    def __init__(self, index: int) -> None:
        """Create the card for GPU ``index``."""
        super().__init__(id=f"gpu-{index}", classes="gpu-card")
        self.index = index
        self.sample: GpuSample | None = None
        self.history: deque[float | None] = deque(maxlen=HISTORY_SAMPLES)
        self.owners: dict[str, str] = {}
        self.gate: GpuGateSnapshot | None = None
        self.holders: tuple[str, ...] = ()

    def push(
        self,
        sample: GpuSample,
        owners: dict[str, str],
        gate: GpuGateSnapshot | None = None,
        holders: Iterable[str] = (),
    ) -> None:
        """Record a new sample (the daemon's verdict on the GPU, which slots hold it) and re-render."""
        self.sample = sample
        self.owners = owners
        self.gate = gate if gate is not None and gate.state != "ok" else None
        self.holders = tuple(holders)
        self.history.append(sample.utilization_pct)
        self.refresh(layout=self._height_changed(sample))

    def _height_changed(self, sample: GpuSample) -> bool:
        return self.size.height != self._lines_for(sample)

    @property
    def compact(self) -> bool:
        """One line per GPU below 40 rows (the dashboard's ``-short``/``-medium`` breakpoints)."""
        try:
            return self.screen.has_class("-short") or self.screen.has_class("-medium")
        except Exception:  # noqa: BLE001 - not attached to a screen yet
            return False

    def _lines_for(self, sample: GpuSample) -> int:
        if self.compact:
            return 1
        gate = 1 if self.gate is not None else 0
        return 3 + len(sample.processes) + gate + len(self.holders)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """One line when compact, else three lines plus one per process."""
        if self.sample is None:
            return 1
        return self._lines_for(self.sample)

    def _owner(self, proc: GpuProcess) -> Text:
        name = self._owner_name(proc)
        if name is not None:
            return Text(f"→ {name}", style="bold")
        if proc.container_name or proc.container_id:
            label = proc.container_name or (proc.container_id or "")[:12]
            return Text(f"→ container {label} (not an agent)", style="yellow")
        return Text("→ host process (not an agent)", style="yellow")

    def _owner_name(self, proc: GpuProcess) -> str | None:
        for key in (proc.container_name, proc.container_id, (proc.container_id or "")[:12]):
            if key and key in self.owners:
                return self.owners[key]
        return None

    def render(self) -> Text:
        """Render the card at the current width."""
        width = max(24, self.size.width)
        sample = self.sample
        if sample is None:
            return Text(f"GPU {self.index}: waiting for the first sample…", style="bright_black")
        if self.compact:
            return self._render_line(sample, width)
        return self._render_card(sample, width)

    def _render_line(self, sample: GpuSample, width: int) -> Text:
        """``0 ▃▅▇█  88%  60/80G  71°C  312W gpuhost-1``: fixed-width fields, then the owners.

        Every figure has a fixed width and the history's width depends only on
        the panel's width, so the % column lines up on every card whatever the
        agent names after it.
        """
        util = sample.utilization_pct
        util_text = " N/A" if util is None else f"{util:3.0f}%"
        if sample.memory_used_mib is None or sample.memory_total_mib is None:
            mem = NA
        else:
            mem = f"{gib(sample.memory_used_mib, 0)}/{gib(sample.memory_total_mib, 0)}G"
        temp = number(sample.temperature_c, unit="°C")
        power = number(sample.power_w, unit="W")
        figures = Text(f" {mem:>{_MEM_CELLS}} {temp:>{_TEMP_CELLS}} {power:>{_POWER_CELLS}}")
        owners = [self._owner_name(p) for p in sample.processes]
        named = [name for name in owners if name]
        tail = Text(no_wrap=True)
        if self.gate is not None:  # first: on a narrow panel the owners are cut, not this
            tail.append(f" {self.gate.state.upper()}", style=GATE_STYLES.get(self.gate.state, ""))
        if named:
            tail.append(" " + ",".join(named), style="bold")
        if len(named) < len(owners):
            tail.append(" +foreign", style="yellow")
        head = Text(f"{sample.index} ", style="bold")
        fixed = head.cell_len + 1 + len(util_text) + figures.cell_len
        spark_width = max(3, min(20, width - fixed - _OWNER_CELLS))
        line = Text.assemble(
            head,
            spark(self.history, spark_width),
            " ",
            (util_text, level_style(util)),
            figures,
            tail,
            no_wrap=True,
        )
        line.truncate(width, overflow="ellipsis")
        return line

    def _render_card(self, sample: GpuSample, width: int) -> Text:
        power = number(sample.power_w, unit=" W")
        if sample.power_w is not None and sample.power_limit_w is not None:
            power = f"{sample.power_w:.0f}/{sample.power_limit_w:.0f} W"
        right = f"{number(sample.temperature_c, unit='°C')}  {power}"
        title = truncate(f"GPU{sample.index} {sample.name}", max(8, width - len(right) - 1))
        line1 = Text.assemble(
            (title, "bold"), " " * max(1, width - len(title) - len(right)), right, no_wrap=True
        )

        util = sample.utilization_pct
        mem_pct = None
        if sample.memory_used_mib is not None and sample.memory_total_mib:
            mem_pct = sample.memory_used_mib / sample.memory_total_mib * 100.0
        mem_text = f"{gib(sample.memory_used_mib)}/{gib(sample.memory_total_mib)} GiB"
        util_text = NA if util is None else f"{util:3.0f}%"
        spare = width - len("util  ") - len(util_text) - len("  mem  ") - len(mem_text)
        bar_width = spare // 2
        if bar_width >= 3:
            line2 = Text.assemble(
                "util ",
                bar(util, bar_width, level_style(util)),
                (f" {util_text}", level_style(util)),
                "  mem ",
                bar(mem_pct, bar_width, level_style(mem_pct)),
                f" {mem_text}",
                no_wrap=True,
            )
        else:  # too narrow for bars: the numbers matter more
            line2 = Text.assemble(
                "util ", (util_text, level_style(util)), "  mem ", mem_text, no_wrap=True
            )
        label = "util history "
        line3 = Text.assemble((label, "bright_black"), spark(self.history, width - len(label)))
        lines = [line1, line2, line3]
        if self.gate is not None:
            lines.insert(
                1,
                Text.assemble(
                    (f" {self.gate.state.upper()} ", GATE_STYLES.get(self.gate.state, "")),
                    f" {self.gate.reason}",
                    no_wrap=True,
                ),
            )
        lines += [Text(f"  {holder}", style="cyan", no_wrap=True) for holder in self.holders]
        for proc in sample.processes:
            used = "" if proc.used_memory_mib is None else f" {gib(proc.used_memory_mib)} GiB"
            name = f" {proc.name}" if proc.name else ""
            head = Text(f"  pid {proc.pid}{name}{used} ", no_wrap=True)
            lines.append(Text.assemble(head, self._owner(proc), no_wrap=True))
        for line in lines:
            line.truncate(width, overflow="ellipsis")
        return Text("\n").join(lines)


class GpuPanel(VerticalScroll):
    """All GPU cards, or the reason no GPU is visible."""

    snapshot: var[SupervisorSnapshot | None] = var(None, init=False)
    """The supervisor's last snapshot: who owns each GPU process, and each GPU's gate."""

    def __init__(self, *, id: str | None = None) -> None:
        """Create an empty panel; cards appear with the first frame."""
        super().__init__(id=id)
        self.border_title = "GPUs"
        self._owners: dict[str, str] = {}
        self._gates: dict[int, GpuGateSnapshot] = {}
        self._snapshot: SupervisorSnapshot | None = None
        self.frame: GpuFrame | None = None

    def compose(self) -> Iterable[Widget]:
        """Start with a placeholder until the first frame arrives."""
        yield Static("Sampling GPUs…", id="gpu-none", classes="muted")

    def watch_snapshot(self, snapshot: SupervisorSnapshot | None) -> None:
        """Take the owners and gates of a new snapshot; the next frame shows them."""
        if snapshot is None:
            return
        self._owners = owner_map(snapshot)
        self._gates = {gate.index: gate for gate in snapshot.gpu_gates}
        self._snapshot = snapshot

    def show_frame(self, frame: GpuFrame) -> None:
        """Render a new frame: update cards in place, add cards for new GPUs."""
        self.frame = frame
        placeholder = self.query_one("#gpu-none", Static)
        if not frame.host.available:
            reason = frame.host.reason or "the NVIDIA driver did not answer"
            placeholder.update(Text(f"No GPU visible: {reason}", style="yellow"))
            placeholder.display = True
            return
        if not frame.gpus:
            placeholder.update(Text("The driver reports no GPUs.", style="yellow"))
            placeholder.display = True
            return
        placeholder.display = False
        driver = frame.host.driver_version
        cuda = frame.host.cuda_driver_version
        subtitle = f"driver {driver}" if driver else ""
        if cuda:
            subtitle += f" · CUDA {cuda[0]}.{cuda[1]}"
        self.border_subtitle = subtitle
        names = {sample.name for sample in frame.gpus}
        model = f" · {len(frame.gpus)}× {names.pop()}" if len(names) == 1 else ""
        self.border_title = f"GPUs{model}"
        cards = {card.index: card for card in self.query(GpuCard)}
        held = holders(self._snapshot, frame.gpus) if self._snapshot is not None else {}
        for sample in frame.gpus:
            card = cards.get(sample.index)
            if card is None:
                card = GpuCard(sample.index)
                self.mount(card)
                cards[sample.index] = card
            card.push(
                sample, self._owners, self._gates.get(sample.index), held.get(sample.index, ())
            )
