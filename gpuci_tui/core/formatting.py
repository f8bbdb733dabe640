"""Plain-text formatters shared by the CLI and the console (no Rich, no I/O).

One formatter per quantity (durations and ages, GPU memory, job labels, exit
labels, job results), so ``gpuci-tui status``, ``gpuci-tui history`` and the
console never disagree about how long an agent has been up or why it exited.
Where the CLI and the console need a long and a short form, both live here side
by side; the panels add only colour (`gpuci_tui.widgets.format`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gpuci_tui.core.models import ExitInfo, JobInfo


class FinishedJob(Protocol):
    """What `job_result` reads of a history row (the store's `JobRecord`).

    A protocol, not the store's class: formatting is part of the base every
    package may use, and the base imports no package above it.
    """

    @property
    def result(self) -> str | None: ...  # noqa: D102
    @property
    def exit_code(self) -> int | None: ...  # noqa: D102
    @property
    def oom(self) -> bool: ...  # noqa: D102
    @property
    def xid(self) -> tuple[int, ...]: ...  # noqa: D102


def duration(seconds: float | None) -> str:
    """A compact duration that always keeps its unit: ``45s``, ``12m05s``, ``3h02m``, ``2d04h``.

    None, and a negative span (a clock that stepped back), are ``-``: a made-up
    ``0s`` would look like a fact. At most six characters, so a column of them
    never cuts a unit off.
    """
    if seconds is None or seconds < 0:
        return "-"
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def ago(then: float | None, now: float, *, compact: bool = False) -> str:
    """How long ago ``then`` was.

    Two forms of the one rule: words for the console (``just now``, ``12 s ago``,
    ``3 min ago``, ``2 h ago``) and, with ``compact``, the CLI's `duration`
    (``3s ago``, ``12m05s ago``) that lines up with its uptimes. None is ``never``.
    """
    if then is None:
        return "never"
    delta = now - then
    if compact:
        return "just now" if delta < 1 else f"{duration(delta)} ago"
    if delta < 2:
        return "just now"
    if delta < 120:
        return f"{int(delta)} s ago"
    if delta < 7200:
        return f"{int(delta // 60)} min ago"
    return f"{int(delta // 3600)} h ago"


def clock_time(when: float, now: float) -> str:
    """``10:02`` (local time), with the date when ``when`` is not on ``now``'s day."""
    then = time.localtime(when)
    if time.localtime(now)[:3] == then[:3]:
        return time.strftime("%H:%M", then)
    return time.strftime("%Y-%m-%d %H:%M", then)


def until(when: float | None, now: float) -> str:
    """A countdown to ``when``: ``in 12 s``, ``in 3 min``, or ``now`` (``""`` for None)."""
    if when is None:
        return ""
    delta = when - now
    if delta < 1:
        return "now"
    if delta < 120:
        return f"in {int(delta + 0.999)} s"
    return f"in {int(delta // 60)} min"


def truncate(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` cells, marking the cut with an ellipsis."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    return text[: max(0, width - 1)] + "…"


def wrap_words(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken between whole words.

    A word longer than a line is split (a path, an id): nothing is lost, nothing cut.
    """
    import textwrap

    return textwrap.wrap(text, max(1, width), break_on_hyphens=False) or [""]


_DANGLING = " \t,;:·-–—/(|"
"""What may not end a cut: a separator left before the ellipsis reads as a missing word."""


def cut_words(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, cut after a whole word and marked with ``…``.

    The one rule for every reason, message and name that may not fit: ``"GPU 1 is
    held by pid 4242"`` at 16 is ``"GPU 1 is held…"``, never ``"GPU 1 is held b…"``.
    A separator left at the cut (``,`` ``:`` `` - ``) goes too. Only when the
    whole words would keep less than half the room (one long word: a name, a
    path, an id) is the word itself cut, so the cut still tells what it was.
    """
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    room = width - 1  # the ellipsis takes the last cell
    head = text[:room]
    if not text[room].isspace():
        head = head.rpartition(" ")[0] if " " in head else ""
    head = head.rstrip(_DANGLING)
    if len(head) < room // 2:
        head = text[:room].rstrip()
    return head + "…"


# --------------------------------------------------------------------------- GPU memory
# Every figure comes in MiB (NVML's unit, and the history's). Three forms, side by side:
# a figure for "used/total GiB" cards, a size with its unit for sentences and tables,
# and a four-cell form for the job column. The GPU gates' reasons say "GB" (`memory_gb`):
# operators grep the event log and the daemon's log for those words.

NA = "N/A"
"""A figure the driver does not report."""


def gib(mib: float | None, decimals: int = 1) -> str:
    """MiB as a GiB figure without its unit (``60.0``; ``60`` with 0 decimals), or ``N/A``."""
    return NA if mib is None else f"{mib / 1024:.{decimals}f}"


def byte_size(value: float) -> str:
    """A size with its binary unit: whole numbers below a GiB (``512 MiB``), one decimal from
    a GiB up (``17.6 GiB``, ``2.0 TiB``). The one size rule: GPU memory, disk space, pulls.
    """
    size = float(value)
    for unit in ("B", "KiB", "MiB"):
        if abs(round(size)) < 1024:
            return f"{size:.0f} {unit}"
        size /= 1024
    if abs(size) < 1024:
        return f"{size:.1f} GiB"
    return f"{size / 1024:.1f} TiB"


def memory(mib: float | None) -> str:
    """A size given in MiB with its unit (`byte_size`); ``-`` when not known."""
    return "-" if mib is None else byte_size(mib * 1024 * 1024)


def memory_short(mib: float | None) -> str:
    """At most four cells: ``512M``, ``7.8G``, ``57G`` (ten GiB and more lose the decimal).

    The job column of the agents and the history; ``-`` when not measured.
    """
    if mib is None:
        return "-"
    if round(mib) < 1000:
        return f"{mib:.0f}M"
    size = mib / 1024
    return f"{size:.1f}G" if size < 9.95 else f"{size:.0f}G"


def memory_gb(mib: float) -> str:
    """The GPU gates' words: ``61 GB``, ``2.0 GB``, ``900 MB`` (binary units, as NVML counts)."""
    size = mib / 1024
    return f"{size:.0f} GB" if size >= 10 else f"{size:.1f} GB" if size >= 1 else f"{mib:.0f} MB"


# --------------------------------------------------------------------------- jobs and exits


def job_label(job: JobInfo | None, width: int | None = None) -> str:
    """``'train - main' 20261122.3`` for a job, ``request 8`` before its pipeline is known, ``-``.

    With ``width``, a long pipeline name is shortened first so the run number,
    which tells runs of the same pipeline apart, stays readable.
    """
    if job is None:
        return "-"
    if not job.request_id and not job.pipeline:
        # Only the agent's own line told of it so far (`Running job: NAME`).
        label = f"job '{job.name}'" if job.name else "job"
        return label if width is None else truncate(label, width)
    run = job.run if job.run else f"(request {job.request_id})"
    if not job.pipeline:
        label = f"request {job.request_id}"
        return label if width is None else cut_words(label, width)
    label = f"'{job.pipeline}' {run}"
    if width is None or len(label) <= width:
        return label
    room = width - len(run) - 3  # quotes and the space
    if room < 4:
        return cut_words(label, width)
    return f"'{cut_words(job.pipeline, room)}' {run}"


def exit_code(info: ExitInfo) -> str:
    """The exit code, ``?`` when Docker did not say."""
    return "?" if info.code is None else str(info.code)


def exit_label(info: ExitInfo | None) -> str:
    """``0 job finished``, ``137 OOM killed: out of memory``, ``?``; ``-`` for no exit yet.

    The code, ``OOM`` when the kernel killed it for memory, then the reason
    (which names the signal, see `core.engine.exits`).
    """
    if info is None:
        return "-"
    oom = " OOM" if info.oom else ""
    reason = info.reason
    if info.code is not None:
        # The code leads the label: a reason that starts with it would say it twice
        # ("0 exited 0", "137 exit code 137: killed").
        reason = reason.removeprefix(f"exit code {info.code}: ")
        if reason == f"exited {info.code}":
            reason = "exited"
    return f"{exit_code(info)}{oom}{f' {reason}' if reason else ''}"


def job_result(record: FinishedJob, *, short: bool = False) -> str:
    """How a finished job ended: Azure DevOps' result, else its exit code (``exit 3``), else ``-``.

    Long (``gpuci-tui history``): then the GPU's Xid, whose failure it may be, and
    ``(OOM)``. Short (the console's result column): ``OOM`` alone wins, because it
    says what to fix.
    """
    if short and record.oom:
        return "OOM"
    text = record.result or (f"exit {record.exit_code}" if record.exit_code is not None else "-")
    if short:
        return text
    if record.xid:
        text += f" (GPU Xid {','.join(str(x) for x in record.xid)})"
    return f"{text} (OOM)" if record.oom else text


def image_label(reference: str, image_id: str, repo_digest: str = "") -> str:
    """What a lane runs, compactly: ``REF (id 3f2a1b9c0d4e, digest sha256:abcdef123456)``.

    The id is shortened as ``docker images`` prints it; the digest to its first 12 hex
    digits (enough to tell two pushes apart). An unknown id says so rather than guessing.
    """
    if not image_id:
        return f"{reference or '?'} (id not known yet)"
    parts = [f"id {short_id(image_id)}"]
    if repo_digest:
        digest = repo_digest.partition("@")[2]
        parts.append(f"digest {digest[: len('sha256:') + 12]}")
    return f"{reference or '?'} ({', '.join(parts)})"


def short_id(image_id: str) -> str:
    """An image id as ``docker images`` prints it: 12 hex digits, no ``sha256:``."""
    return image_id.removeprefix("sha256:")[:12]
