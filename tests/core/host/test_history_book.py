"""The recorder's book: each job request one row, whichever side comes first, late, or twice."""

from __future__ import annotations

from pathlib import Path

from gpuci_tui.core.host.observers.history_book import GRACE, MARGIN, MAX_WAIT, RECENT, HistoryBook
from gpuci_tui.core.host.observers.job_match import RanJob
from gpuci_tui.core.protocols import JobRequest
from gpuci_tui.core.store.history import JobHistory, JobQuery, JobRecord
from gpuci_tui.sim.records import wire_time

AGENT = "h-1"


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def request(
    request_id: int, assigned: float, finished: float, result: str = "succeeded"
) -> JobRequest:
    return JobRequest(
        request_id=request_id,
        queue_time=wire_time(assigned - 1.0),
        assign_time=wire_time(assigned),
        receive_time=wire_time(assigned),
        finish_time=wire_time(finished),
        result=result,
        definition_name="train - main",
        owner_name=f"run.{request_id}",
    )


def ended(
    started: float, at: float, request_id: int | None = None, name: str | None = None
) -> tuple[JobRecord, RanJob]:
    """The host's record of a container of lane h-1 that ran a job, and what was seen."""
    record = JobRecord(
        instance="i1", slot=1, agent=AGENT, request_id=request_id, pipeline=name, run=None,
        started_at=started, ended_at=at, exit_code=0, oom=False, reason="job finished",
        gpus=(0,), gpu_samples=3,
    )  # fmt: skip
    return record, RanJob(AGENT, started, at, request_id, name)


def rows(history: JobHistory) -> list[JobRecord]:
    return sorted(history.query(JobQuery(limit=None)), key=lambda r: r.ended_at)


def book_at(clock: Clock, history: JobHistory | None = None) -> HistoryBook:
    return HistoryBook(history or JobHistory(":memory:", clock=clock), "i1", clock)


def test_seen_running_then_its_view_one_row_reported_once() -> None:
    clock = Clock()
    book = book_at(clock)
    book.exited(*ended(990.0, 1000.0, request_id=7), seen=True)
    assert book.reports == []  # waits for the organisation's view
    clock.now += 1
    book.learned([(AGENT, request(7, 992.0, 999.5))])
    (row,) = rows(book.history)
    assert (row.request_id, row.result, row.gpus, row.run) == (7, "succeeded", (0,), "run.7")
    assert [r.request_id for r in book.reports] == [7]
    book.learned([(AGENT, request(7, 992.0, 999.5))])  # the next read shows it again
    assert len(rows(book.history)) == 1 and len(book.reports) == 1


def test_a_delayed_latest_never_retags_older_jobs() -> None:
    """Issue 28: seven jobs of one agent over ~35 s, the organisation read late: each row
    keeps the request its lane was seen running, and the latest completes only its own."""
    clock = Clock()
    book = book_at(clock)
    for i in range(7):
        book.exited(*ended(960.0 + 5 * i, 964.0 + 5 * i, request_id=60 + i), seen=True)
    clock.now += 60
    book.learned([(AGENT, request(66, 992.0, 994.0))])
    got = [(r.request_id, r.result) for r in rows(book.history)]
    assert got == [(60 + i, None) for i in range(6)] + [(66, "succeeded")]


def test_a_job_seen_only_by_its_agents_line_is_matched_by_its_times() -> None:
    clock = Clock()
    book = book_at(clock)
    book.exited(*ended(990.0, 1000.0, name="train - main"), seen=True)
    (waiting,) = rows(book.history)
    assert waiting.request_id is None and waiting.pipeline == "train - main"
    book.learned([(AGENT, request(6, 950.0, 980.0)), (AGENT, request(7, 993.0, 999.0))])
    clock.now += GRACE + 1
    book.learned([])
    got = [(r.request_id, r.reconciled, r.gpus) for r in rows(book.history)]
    # Request 6 ended before this daemon began: a row of its own at once.
    assert got == [(6, True, ()), (7, False, (0,))]


def test_a_container_where_no_job_was_seen_gets_a_row_only_for_a_request() -> None:
    clock = Clock()
    book = book_at(clock)
    book.exited(*ended(990.0, 1000.0), seen=False)
    book.exited(*ended(1001.0, 1010.0), seen=False)  # stopped idle: no job at all
    assert rows(book.history) == []
    clock.now = 1011.0
    book.learned([(AGENT, request(7, 993.0, 999.0))])
    assert [(r.request_id, r.gpus) for r in rows(book.history)] == [(7, (0,))]
    clock.now += MAX_WAIT
    book.learned([])
    assert len(rows(book.history)) == 1  # the idle one is forgotten, never a row


def test_a_request_whose_end_was_not_seen_gets_its_own_row_and_a_late_end_joins_it() -> None:
    clock = Clock()
    book = book_at(clock)
    clock.now = 1010.0
    book.learned([(AGENT, request(7, 1001.0, 1005.0))])
    assert rows(book.history) == []  # its container may still end: wait out the grace
    clock.now = 1005.0 + GRACE
    book.learned([])
    (row,) = rows(book.history)
    assert row.reconciled and row.reason.startswith("recorded after a restart")
    book.exited(*ended(1000.0, 1100.0), seen=False)  # a container slow to end, seen at last
    (row,) = rows(book.history)
    assert (row.request_id, row.reconciled, row.gpus, row.ended_at) == (7, False, (0,), 1100.0)
    assert len(book.reports) == 1


def test_a_restart_continues_from_the_mark_exactly_once(tmp_path: Path) -> None:
    clock = Clock()
    history = JobHistory(tmp_path / "h.sqlite3", clock=clock)
    first = book_at(clock, history)
    first.agents_seen({11: AGENT}, set())
    first.exited(*ended(990.0, 1000.0, request_id=7), seen=True)  # its view never came
    first.exited(*ended(1001.0, 1010.0, name="train - main"), seen=True)  # nor its request
    clock.now = 1100.0
    first.learned([(AGENT, request(5, 900.0, 950.0))])  # an old job: its own row at once
    # SIGKILL: the next daemon starts from the history alone.
    clock.now = 1200.0
    again = book_at(clock, history)
    again.start()
    assert again.agent_ids() == {11}  # whose finished requests to read
    again.learned(
        [
            (AGENT, request(r, a, f))
            for r, a, f in ((5, 900.0, 950.0), (7, 992.0, 999.0), (8, 1003.0, 1008.0),
                            (9, 1150.0, 1190.0))
        ]
    )  # fmt: skip
    got = [(r.request_id, r.reconciled, r.result) for r in rows(history)]
    assert got == [
        (5, True, "succeeded"),
        (7, False, "succeeded"),
        (8, False, "succeeded"),
        (9, True, "succeeded"),  # ended while no daemon ran
    ]


def test_requests_older_than_the_look_back_are_left_alone() -> None:
    clock = Clock(5000.0)
    history = JobHistory(":memory:", clock=clock)
    history.set_mark("i1", 4000.0, [11])
    book = book_at(clock, history)
    book.learned([(AGENT, request(1, 100.0, 200.0)), (AGENT, request(2, 3990.0, 3995.0))])
    assert [r.request_id for r in rows(history)] == [2]


def test_the_mark_moves_behind_what_still_waits() -> None:
    clock = Clock()
    history = JobHistory(":memory:", clock=clock)
    book = book_at(clock, history)
    book.exited(*ended(990.0, 1000.0, name="x"), seen=True)
    clock.now = 1500.0
    book.learned([])
    mark = history.mark("i1")
    assert mark is not None and mark[0] <= 1000.0  # a restart still looks for its request
    book.learned([(AGENT, request(7, 993.0, 999.0))])
    assert history.mark("i1") == (1500.0 - GRACE, ())  # nothing waits: up to the grace


def test_a_job_seen_running_whose_end_the_list_skipped_waits_for_a_read() -> None:
    # A restarted daemon sees lane h-1 still assigned request 7 (its container died while no
    # daemon ran); the lane's next registration abandons 7 and runs 8 between two reads, so
    # the list's last finished request is 8 at once: only a read of all of them finds 7.
    clock = Clock()
    book = book_at(clock)
    book.agents_seen({11: AGENT}, {7})
    assert book.waiting_since() is None  # running: nothing waits yet
    clock.now = 1001.0
    book.agents_seen({11: AGENT}, set())
    book.learned([(AGENT, request(8, 1000.2, 1000.8))])
    assert book.waiting_since() == 1001.0  # 7 left without its row: it waits
    book.learned([(AGENT, request(7, 990.0, 1000.1, result="abandoned"))])  # the read
    assert book.waiting_since() is None
    clock.now = 1001.0 + GRACE
    book.learned([])
    assert [(r.request_id, r.result) for r in rows(book.history)] == [
        (7, "abandoned"),
        (8, "succeeded"),
    ]


def test_a_job_seen_running_then_ended_in_view_does_not_wait() -> None:
    clock = Clock()
    book = book_at(clock)
    book.agents_seen({11: AGENT}, {7})
    clock.now = 1005.0
    book.exited(*ended(990.0, 1004.0, request_id=7), seen=True)
    book.agents_seen({11: AGENT}, set())
    book.learned([(AGENT, request(7, 991.0, 1004.0))])
    assert book.waiting_since() is None


def test_a_daemon_that_runs_for_months_keeps_no_row_for_good() -> None:
    """Each job's row is remembered only while a read may list its request as new: once the
    mark passed it and RECENT went by, it is forgotten, and a read that lists it again
    (an idle lane's agent shows its last job for hours) still writes nothing twice."""
    clock = Clock()
    book = book_at(clock)
    for i in range(200):  # one job a minute on one lane
        at = clock.now
        book.exited(*ended(at - 50.0, at - 1.0, request_id=1000 + i), seen=True)
        book.learned([(AGENT, request(1000 + i, at - 45.0, at - 2.0))])
        clock.now += 60.0
    remembered = len(book._rows)  # noqa: SLF001 - the memory this test is about
    assert remembered <= (RECENT + GRACE + MARGIN) / 60.0 + 2, remembered
    assert len(rows(book.history)) == 200 and len(book.reports) == 200
    last = request(1199, clock.now - 60.0 - 45.0, clock.now - 60.0 - 2.0)
    for _ in range(30):  # the idle lane's agent still lists its last job, read after read
        clock.now += 60.0
        book.learned([(AGENT, last)])
    first = request(1000, 1000.0 - 45.0, 1000.0 - 2.0)
    book.learned([(AGENT, first)])  # a reconciliation read lists the oldest one again
    clock.now += GRACE + 1.0
    book.learned([])
    assert len(rows(book.history)) == 200 and len(book.reports) == 200
