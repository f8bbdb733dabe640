"""Readers query the history while a writer inserts: a thread and a separate process.

Each reader uses `read_history` (its own read-only connection per call), as
``gpuci-tui history`` does next to a running daemon. With WAL, a reader never
fails with "database is locked" and sees only whole commits, so the counts it
observes only grow.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from gpuci_tui.core.store.history import JobHistory, JobQuery, JobRecord, read_history

ALL = JobQuery(limit=None)


def record(i: int) -> JobRecord:
    return JobRecord(
        "i1", i % 4, f"gpu01-{i % 4}", i, "train", f"r{i}", None, 1000.0 + i, 0, False, "done"
    )


def test_thread_reader_while_writer_inserts(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    writer = JobHistory(path)
    counts: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                counts.append(len(read_history(path, ALL) or []))
            except BaseException as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(exc)
                return

    reader = threading.Thread(target=read)
    reader.start()
    inserted = 0
    deadline = time.monotonic() + 30
    # Keep writing until the reader has seen several different partial counts.
    while len({c for c in counts if c > 0}) < 5 and time.monotonic() < deadline and not errors:
        writer.add(record(inserted))
        inserted += 1
    stop.set()
    reader.join(timeout=30)
    assert errors == []
    assert len({c for c in counts if c > 0}) >= 5, "the reader never overlapped the writer"
    assert counts == sorted(counts)
    assert len(read_history(path, ALL) or []) == inserted
    writer.close()


READER = """
import json, sys, time
from pathlib import Path
from gpuci_tui.core.store.history import JobQuery, read_history
path, target = Path(sys.argv[1]), int(sys.argv[2])
seen, errors = [], []
print("ready", flush=True)
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        n = len(read_history(path, JobQuery(limit=None)) or [])
    except Exception as exc:
        errors.append(repr(exc))
        break
    seen.append(n)
    if n >= target:
        break
print(json.dumps({"seen": seen, "errors": errors}), flush=True)
"""


def test_process_reader_while_writer_inserts(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    writer = JobHistory(path)
    writer.add(record(0))
    target = 400
    proc = subprocess.Popen(
        [sys.executable, "-c", READER, str(path), str(target)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        inserted = 1
        deadline = time.monotonic() + 30
        # The reader stops once it has seen `target` rows; write until then.
        while proc.poll() is None and time.monotonic() < deadline:
            writer.add(record(inserted))
            inserted += 1
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    writer.close()
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["errors"] == []
    seen = result["seen"]
    assert seen[-1] >= target
    assert seen == sorted(seen)
    assert len({n for n in seen if 0 < n < target}) >= 2, "no read happened during the writes"
