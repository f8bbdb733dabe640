"""``gpuci-tui run`` for the history drill tests: the real daemon, its history's waits short.

Run as ``python -m tests.drills.history_daemon --config PATH run``. Everything is the
real daemon; only the history's waits for the organisation's side of a job are a fifth
of the shipped ones (the way bench/bench_soak.py scales them in process): a row still
waiting for its request asks for a read of our agents' finished requests after 3 s
instead of 15, such reads come at most every 6 s instead of 30, and a request whose
container end never came gets its own row after 6 s instead of 30. The drill's test
settings shorten its faults the same way (a 30-s outage is a 6-s one); the long run
(bench/bench_history_drill.py) runs ``gpuci-tui`` itself, with the shipped waits.

Without it, a job that ended just as the daemon was SIGKILLed waited the full 30 s for
its row after the restart, and the kill drill took 44 s where it otherwise takes 23.
"""

from __future__ import annotations

import functools
import sys

PENDING_READ = 3.0
FULL_READ_GAP = 6.0
GRACE = 6.0


if __name__ == "__main__":
    from gpuci_tui.core.host import assemble
    from gpuci_tui.core.host.observers import history_book
    from gpuci_tui.core.host.observers.job_recorder import JobRecorder

    history_book.GRACE = GRACE  # read when each book is made
    assemble.JobRecorder = functools.partial(  # type: ignore[misc]
        JobRecorder, pending_read=PENDING_READ, full_read_gap=FULL_READ_GAP
    )
    from gpuci_tui.cli.main import main

    sys.exit(main(sys.argv[1:]))
