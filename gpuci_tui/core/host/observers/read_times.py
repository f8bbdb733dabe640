"""When the pool observer reads the organisation: the agents, the queue, the hourly check.

The host learns first from its own side (Docker's events, the agents' own
output lines); the organisation's reads confirm and fill in, on a slow cadence:

* the agents every ``poll_interval`` (periodic), counted from the last read;
* once more after a job ends here (`ReadTimes.job_ended`): one read
  `JOB_END_READ_DELAY` later, which the job ends around it share (never closer
  than `MIN_READ_GAP`);
* at once after a command (`ReadTimes.ask`);
* the queue (job requests) every third ``poll_interval``, at most every
  `JOBREQUESTS_INTERVAL`; on an idle host that read takes the periodic agents
  read's turn, so one call goes out per cycle (6 a minute at 10 s). A job that
  starts here brings it forward (`ReadTimes.job_started`) to a moment later,
  once per `QUEUE_AFTER_START_GAP`: a burst is seen right after its first job,
  and a busy host reads its queue about six times a minute;
* the whole pool's check (`pool_reads`) every `CAPABILITIES_INTERVAL`, or at
  once when a prune asks.

Pure timing on the observer's clock: what is read, and how, is the observer's
(`pool`) and `pool_reads`'.
"""

from __future__ import annotations

#: Job requests (queue depth) are read every this many periodic cycles ...
JOBREQUESTS_CYCLES = 3
#: ... and at least this often.
JOBREQUESTS_INTERVAL = 30.0
#: After a job ended here the agents are read this much later (the next job on the slot
#: is assigned by then, and the job ends around it share the read).
JOB_END_READ_DELAY = 1.0
#: Reads of the agents asked for by job ends are at least this far apart.
MIN_READ_GAP = 2.0
#: A job start brings the queue read this close (a burst's jobs are queued together)…
QUEUE_AFTER_START = 0.25
#: … once per this many seconds (the periodic read is pushed back by each read).
QUEUE_AFTER_START_GAP = 10.0
#: One cycle this often reads the whole pool with capabilities (the stale-registration and
#: foreign-name checks) instead of our agents: at 5,000 agents that answer is ~7 MB.
CAPABILITIES_INTERVAL = 3600.0


class ReadTimes:
    """When each of the observer's reads is due next (times on the observer's clock)."""

    def __init__(self, interval: float) -> None:
        """Read the agents every ``interval`` seconds (``poll_interval``); nothing read yet."""
        self.interval = interval
        self.queue_interval = min(JOBREQUESTS_INTERVAL, JOBREQUESTS_CYCLES * interval)
        """Seconds between reads of the queue."""
        self.next_agents = 0.0
        self.next_queue = 0.0
        self.next_capabilities = 0.0
        self.agents_read_at: float | None = None
        self.queue_read_at: float | None = None
        self.asked_at: float | None = None
        """A read of the agents asked for (a job end, a command) is due then."""
        self._queue_asked_at: float | None = None
        """When a job start last brought the queue read forward."""

    def ask(self, at: float) -> bool:
        """A read of the agents is wanted at ``at`` (the earliest wish wins); True: it is sooner."""
        if self.asked_at is None or at < self.asked_at:
            self.asked_at = at
            return True
        return False

    def job_ended(self, now: float) -> bool:
        """A job ended here: one read of the agents soon, shared with the ends around it.

        True when the wish is new (the observer's loop should look again).
        """
        at = now + JOB_END_READ_DELAY
        if self.agents_read_at is not None:
            at = max(at, self.agents_read_at + MIN_READ_GAP)
        return self.asked_at is None and self.ask(at)

    def job_started(self, now: float) -> bool:
        """A job started here: the queue a moment later (a burst shows), once per 10 s.

        True when the queue read moved forward (the observer's loop should look again).
        """
        if self._queue_asked_at is not None and now - self._queue_asked_at < QUEUE_AFTER_START_GAP:
            return False
        at = now + QUEUE_AFTER_START
        if at >= self.next_queue:
            return False
        self._queue_asked_at = now
        self.next_queue = at
        return True

    def capabilities_due(self, began: float) -> bool:
        """The whole pool's check is due in the cycle beginning at ``began``."""
        return began >= self.next_capabilities

    def reads_due(self, began: float, full: bool) -> tuple[bool, bool]:
        """Whether the agents and the queue are to be read in the cycle beginning at ``began``.

        ``full``: the whole pool's check is read in this cycle (it reads our agents too).
        """
        asked = self.asked_at is not None and began >= self.asked_at
        first = self.agents_read_at is None
        periodic = began >= self.next_agents
        queue = began >= self.next_queue
        if queue and not (asked or first or full):
            # Nothing asked for the agents: the queue's read takes the place of the
            # periodic one (one call per cycle while idle); the agents come a cycle later.
            self.next_agents = max(self.next_agents, began + self.interval)
            return False, True
        return first or asked or periodic or full, queue

    def agents_read(self, began: float) -> None:
        """The agents were read at ``began``: the periodic read and the wishes start over."""
        self.agents_read_at = began
        self.next_agents = began + self.interval
        if self.asked_at is not None and self.asked_at <= began:
            self.asked_at = None

    def queue_read(self, began: float) -> None:
        """The queue was read at ``began``."""
        self.queue_read_at = began
        self.next_queue = began + self.queue_interval

    def next_due(self, watched: bool) -> float:
        """When the next read is due (``watched``: the whole pool's check is wanted too)."""
        times = [self.next_agents, self.next_queue]
        if self.asked_at is not None:
            times.append(self.asked_at)
        if watched:
            times.append(self.next_capabilities)
        return min(times)
