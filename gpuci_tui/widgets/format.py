"""Small, pure text formatters shared by the panels (no widgets, no I/O).

Every function takes the current time explicitly where it needs one, so the
output is deterministic under the frozen clock of the tests.
"""

from __future__ import annotations

import time

from rich.text import Text

from gpuci_tui.core import formatting

# Re-exported: the panels take every formatter from this module.
from gpuci_tui.core.formatting import NA as NA
from gpuci_tui.core.formatting import ago as ago
from gpuci_tui.core.formatting import cut_words as cut_words
from gpuci_tui.core.formatting import duration as duration
from gpuci_tui.core.formatting import exit_code, memory_short
from gpuci_tui.core.formatting import gib as gib
from gpuci_tui.core.formatting import job_label as job_label
from gpuci_tui.core.formatting import truncate as truncate
from gpuci_tui.core.formatting import until as until
from gpuci_tui.core.models import ExitInfo, SlotSnapshot, SlotState

#: Rich styles per slot state: the colour says "needs attention?" at a glance.
STATE_STYLES: dict[SlotState, str] = {
    SlotState.EMPTY: "bright_black",
    SlotState.STARTING: "cyan",
    SlotState.IDLE: "green",
    SlotState.BUSY: "bold yellow",
    SlotState.DRAINING: "magenta",
    SlotState.DRAINED: "bright_black",
    SlotState.BACKOFF: "red",
    SlotState.PARKED: "bold white on red",
    SlotState.HELD: "yellow",
    SlotState.QUARANTINED: "bold white on red",
}

#: One line per state for the help screen's legend; ``{resume}`` and ``{gpu_clear}`` are
#: the keys that do it, as bound on the screen the help is for (`screens.help.legend_keys`).
STATE_MEANINGS: dict[SlotState, str] = {
    SlotState.EMPTY: "no container yet; the supervisor is about to start one",
    SlotState.STARTING: "container running, agent not yet online with Azure DevOps",
    SlotState.IDLE: "online and waiting for a job",
    SlotState.BUSY: "running a job",
    SlotState.DRAINING: "disabled on the server; finishing its job, then stops",
    SlotState.DRAINED: "stopped and not replaced until resumed ({resume})",
    SlotState.BACKOFF: "the last container failed early; waiting before retrying",
    SlotState.PARKED: "failed too often; not restarted until resumed ({resume})",
    SlotState.HELD: "a GPU is used by a process not ours; the agent waits, disabled",
    SlotState.QUARANTINED: "a GPU is failing (Xid, ECC, …); no new job until cleared ({gpu_clear})",
}


#: Rich styles of the standby cell.
STANDBY_STYLES: dict[str, str] = {
    "ready": "green",
    "booting": "cyan",
    "pending": "yellow",
    "off": "bright_black",
}

#: One line per standby state for the help screen's legend.
STANDBY_MEANINGS: dict[str, str] = {
    "ready": "a second agent is online but disabled; it takes over the moment this one exits",
    "booting": "the second agent's container is starting and registering (disabled)",
    "pending": "no standby yet: it is registered once the active agent is idle or gone",
    "off": "hot standby is off ([agents] standby = false): one agent per slot",
}


def cut_text(text: Text, width: int) -> Text:
    """``text`` cut after a whole word to ``width`` cells (`cut_words`), its styles kept.

    ``text`` itself is left alone; one that fits is returned as it is.
    """
    if text.cell_len <= width:
        return text
    shown = cut_words(text.plain, width)
    cut = text[: max(0, len(shown) - 1)]
    cut.append("…")
    # `cut_words` counts characters: a wide one (an emoji) may still leave a cell too many.
    cut.truncate(max(0, width), overflow="ellipsis")
    return cut


def standby_text(slot: SlotSnapshot) -> Text:
    """The standby cell: ``ready``, ``booting``, ``pending``, ``off`` or ``-``."""
    label = slot.standby or "-"
    return Text(label, style=STANDBY_STYLES.get(slot.standby, "bright_black"))


def clock_time(at: float) -> str:
    """Local wall-clock time ``HH:MM:SS`` (the tests pin TZ)."""
    return time.strftime("%H:%M:%S", time.localtime(at))


def number(value: float | None, fmt: str = "{:.0f}", unit: str = "") -> str:
    """Format an optional number; None (not supported by the driver) is ``N/A``."""
    if value is None:
        return NA
    return fmt.format(value) + unit


def bar(percent: float | None, width: int, style: str = "green") -> Text:
    """A horizontal bar for a 0–100 value, ``width`` cells wide."""
    if percent is None or width <= 0:
        return Text("·" * max(0, width), style="bright_black")
    filled = round(max(0.0, min(100.0, percent)) / 100.0 * width)
    return Text.assemble(("█" * filled, style), ("░" * (width - filled), "bright_black"))


def level_style(percent: float | None) -> str:
    """Green below 50 %, yellow below 85 %, red above: load at a glance."""
    if percent is None:
        return "bright_black"
    if percent < 50:
        return "green"
    if percent < 85:
        return "yellow"
    return "red"


def state_text(slot: SlotSnapshot, now: float) -> Text:
    """The coloured state cell, with the backoff countdown and pending flags."""
    label = str(slot.state)
    if slot.state is SlotState.BACKOFF and slot.backoff_until is not None:
        label = f"backoff {until(slot.backoff_until, now)}"
    elif slot.state is SlotState.PARKED and slot.failures:
        label = f"parked ({slot.failures}×)"
    text = Text(label, style=STATE_STYLES.get(slot.state, ""))
    if slot.restart_pending:
        text.append(" ↻", style="cyan")
    return text


def exit_label(info: ExitInfo | None) -> Text:
    """`core.formatting.exit_label`, with OOM and failures highlighted."""
    if info is None:
        return Text("-", style="bright_black")
    # The whole label takes the colour of its code (a failure reads red to its end).
    text = Text(formatting.exit_label(info), style="green" if info.code == 0 else "red")
    code = len(exit_code(info))
    if info.oom:
        text.stylize("bold white on red", code, code + len(" OOM"))
    return text


GPU_USE_WIDTH = 9
"""Cells of `gpu_use_text` at most (``80G 100%``), so the figures line up in the job column."""


def gpu_use_text(memory_bytes: int | None, util_percent: float | None) -> Text:
    """A running job's GPU memory and utilisation now: ``7.8G 93%``, ``—`` when not known.

    Ten GiB and more lose the decimal, so the figure never outgrows `GPU_USE_WIDTH`.
    """
    if memory_bytes is None and util_percent is None:
        return Text("—", style="bright_black", justify="right")
    memory = "—" if memory_bytes is None else memory_short(memory_bytes / 2**20)
    text = Text(memory, style="bright_black" if memory_bytes is None else "")
    text.append(" ")
    if util_percent is None:
        text.append("—", style="bright_black")
    else:
        text.append(f"{util_percent:.0f}%", style=level_style(util_percent))
    return text


def gpus_label(gpus: tuple[str, ...]) -> str:
    """``0,1`` / ``all`` / ``-``."""
    return ",".join(gpus) if gpus else "-"
