"""``gpuci-tui history``: finished jobs from the local SQLite history, no daemon needed.

The file is opened read-only (`read_history`), so this works beside a running
daemon, with none, and on a history written by an older release.

``--json`` prints a list of objects, newest first, with these keys (stable;
new keys may be added): id, instance, slot, agent, request_id, pipeline, run,
started_at, ended_at (ISO-8601 UTC or null), duration_s, queue_wait_s, result,
exit_code, oom, failed, reason, gpus (list of indexes), gpu_samples,
peak_gpu_memory_mib, mean_util_pct, peak_util_pct, energy_j, energy_note, xid (list of the
critical Xids the job's GPU raised while it ran), image (the reference the job's container was
created from), image_id (``sha256:…`` of the image it ran) and repo_digest (``REPO@sha256:…``),
throttle_s (an object: seconds per clocks-event reason, e.g. {"sw_thermal": 12.0}; {} when
read and never throttled), ecc_corrected and ecc_uncorrected (ECC errors during the job) and
peak_temp_c, each null when not recorded; startup_s; reconciled (true: recorded after a
restart, from the organisation's finished requests: the daemon did not see the job end, so
the row has no container facts or GPU figures), assigned_at and finished_at (the request's
assignment and finish as the organisation timed them; null: not read).

A job request is one row: a job whose end the daemon did not see (it was not running) is
recorded from the organisation when the daemon runs again; its RESULT says "recorded after
a restart".

``--gpu`` adds a GPU FACTS column to the table: energy, throttle seconds by reason, ECC
errors, Xids and the peak temperature in one line ("412 kJ · thermal 12 s · Xid 79 · 83 °C").
"""

from __future__ import annotations

import argparse
import json
import re
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gpuci_tui.core.config.file import is_ascii_number
from gpuci_tui.core.formatting import job_result, memory

from . import exitcodes
from .common import CliExit, fail

if TYPE_CHECKING:
    from gpuci_tui.core.store.history import JobRecord

SINCE_FORMS = (
    "a duration back from now like 30m, 12h, 2d or 1w, "
    "or a local date or time like 2026-09-28 or 2026-09-28T14:00"
)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])", re.IGNORECASE)
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
RECONCILED = "recorded after a restart"
"""What a row the organisation's finished requests gave says (`JobRecord.reconciled`)."""
HEADER = (
    "ENDED", "PIPELINE", "RUN", "SLOT", "GPU", "DURATION", "WAIT", "PEAK MEM", "UTIL", "RESULT",
)  # fmt: skip


def add_history_parser(sub: Any) -> None:
    """Declare ``history`` on the ``gpuci-tui`` subcommand parsers."""
    parser = sub.add_parser(
        "history",
        help="list finished jobs from the local history (works without a daemon)",
        description="List finished jobs, newest first, from the local job history "
        "(one line per job: end time, pipeline, run, slot, GPUs, duration, queue wait, "
        "peak GPU memory, mean GPU utilisation, result).",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list of objects")
    parser.add_argument(
        "--gpu",
        action="store_true",
        help="add a GPU FACTS column: energy, throttle seconds, ECC errors, Xids, peak temperature",
    )
    parser.add_argument("--pipeline", metavar="NAME", help="only jobs of this pipeline")
    parser.add_argument("--since", metavar="WHEN", help=f"only jobs that ended since {SINCE_FORMS}")
    parser.add_argument("--slot", metavar="N", help="only jobs of this slot")
    parser.add_argument(
        "--failed",
        action="store_true",
        help="only failed jobs (failed/canceled/abandoned, OOM-killed, or a non-zero exit)",
    )
    parser.add_argument(
        "--limit", metavar="N", default="50", help="at most N jobs (default 50, 0 for all)"
    )


def parse_since(text: str, now: float) -> float:
    """``--since`` as a Unix time: a duration back from ``now`` or a local date/time.

    Raises:
        ValueError: with a message naming the accepted forms.
    """
    value = text.strip()
    match = _DURATION.fullmatch(value)
    if match:
        return now - float(match[1]) * _UNIT_S[match[2].lower()]
    try:
        # A naive date or time is local time, as the table shows it.
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise ValueError(f"--since must be {SINCE_FORMS}; got {text!r}") from None


def _count(text: str, option: str, what: str) -> int:
    if not is_ascii_number(text.strip()):
        raise CliExit(exitcodes.USAGE, f"{option} must be {what}; got {text!r}")
    return int(text)


def run_history(args: argparse.Namespace, now: float | None = None) -> int:
    """Print the history matching the options; see the module docstring for ``--json``."""
    from gpuci_tui.core.config.paths import history_db_path
    from gpuci_tui.core.errors import GpuciError
    from gpuci_tui.core.store.history import JobQuery, read_history

    now = time.time() if now is None else now
    try:
        try:
            since = parse_since(args.since, now) if args.since is not None else None
        except ValueError as exc:
            raise CliExit(exitcodes.USAGE, str(exc)) from None
        slot = (
            _count(args.slot, "--slot", "a slot number (0, 1, …)")
            if args.slot is not None
            else None
        )
        limit = _count(args.limit, "--limit", "a whole number of jobs (0 for all)")
        query = JobQuery(
            pipeline=args.pipeline,
            since=since,
            slot=slot,
            failed_only=args.failed,
            limit=limit or None,
        )
        try:
            path = history_db_path()
            rows = read_history(path, query)
        except GpuciError as exc:  # HistoryError, PathError
            raise CliExit(exitcodes.FAILED, str(exc)) from None
    except CliExit as exc:
        return fail(exc)
    if args.json:
        print(json.dumps([_json(r) for r in rows or []], indent=2))
    elif rows is None:
        print(f"no jobs recorded yet (no history file at {path})")
    elif not rows:
        print("no jobs match")
    else:
        print(render_history(rows, gpu_facts=getattr(args, "gpu", False)))
    return exitcodes.OK


def render_history(rows: list[JobRecord], *, gpu_facts: bool = False) -> str:
    """The plain aligned table, one line per `JobRecord` (``gpu_facts``: with GPU FACTS last)."""
    from gpuci_tui.core.formatting import duration

    table: list[tuple[str, ...]] = [(*HEADER, "GPU FACTS") if gpu_facts else HEADER]
    for r in rows:
        table.append(
            (
                time.strftime("%Y-%m-%d %H:%M", time.localtime(r.ended_at)),
                r.pipeline or "-",
                r.run or "-",
                str(r.slot),
                ",".join(str(i) for i in r.gpus) or "-",
                duration(r.duration_s),
                duration(r.queue_wait_s),
                memory(r.peak_gpu_memory_mib),
                "-" if r.mean_util_pct is None else f"{r.mean_util_pct:.0f}%",
                job_result(r) + (f", {RECONCILED}" if r.reconciled else ""),
                *((r.gpu_facts or "-",) if gpu_facts else ()),
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    lines = []
    for row in table:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _json(r: JobRecord) -> dict[str, Any]:
    return {
        "id": r.id,
        "instance": r.instance,
        "slot": r.slot,
        "agent": r.agent,
        "request_id": r.request_id,
        "pipeline": r.pipeline,
        "run": r.run,
        "started_at": _iso(r.started_at),
        "ended_at": _iso(r.ended_at),
        "duration_s": r.duration_s,
        "queue_wait_s": r.queue_wait_s,
        "result": r.result,
        "exit_code": r.exit_code,
        "oom": r.oom,
        "failed": r.failed,
        "reason": r.reason,
        "gpus": list(r.gpus),
        "gpu_samples": r.gpu_samples,
        "peak_gpu_memory_mib": r.peak_gpu_memory_mib,
        "mean_util_pct": r.mean_util_pct,
        "peak_util_pct": r.peak_util_pct,
        "energy_j": r.energy_j,
        "energy_note": r.energy_note,
        "xid": list(r.xid),
        "image": r.image,
        "image_id": r.image_id,
        "repo_digest": r.repo_digest,
        "throttle_s": dict(r.throttle_s) if r.throttle_s is not None else None,
        "ecc_corrected": r.ecc_corrected,
        "ecc_uncorrected": r.ecc_uncorrected,
        "peak_temp_c": r.peak_temp_c,
        "startup_s": r.startup_s,
        "reconciled": r.reconciled,
        "assigned_at": _iso(r.assigned_at),
        "finished_at": _iso(r.finished_at),
    }
