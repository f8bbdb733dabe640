"""A small discrete-event world for the pure engine: Docker, the agents and Azure DevOps.

It runs `transitions.apply` and `planner.decide` against a model of the
outside systems with random (seeded) timings: container starts, the two
start-up steps of an agent (registration, then session), job dispatch to
enabled online agents, job lengths, crashes, late reads of the pool and
failing writes. It asserts the engine's promises while it runs:

* never two jobs on one slot's agents at the same time;
* never a stop of a container whose agent has a job;
* with ``reloads``: the agent spec changes at random (canaries, some new specs that
  crash at every start and must be rolled back), and the two promises above still hold;
* with ``gpu_faults``: no job is handed to a slot whose GPU has been taken by a
  foreign process, or has failed, for longer than `GATE_MARGIN` seconds (GPU
  frames come every second; a disable takes a write, which may fail and retry);
* with ``outages``: now and then the organisation refuses every call of the
  daemon (reads and writes) for a while, its agents going on; jobs keep being
  handed out meanwhile (`refused_jobs`), by the lanes restarted in place.

The agents print the real agent's lines (``Listening for Jobs``, ``Running job``,
``Job … completed``), and with ``gated`` start.sh's "registered, waiting for the
go" before they wait for the engine's go: each line reaches the engine late (up to
`LINE_LATE` s), one in `missing_lines` never does, and a job may print a fake
"completed" line halfway (`fake_lines`; a true one is only ever noted, so the
world leaves it out). The pool is read every ``poll_interval``.

Everything is virtual time: a run of ten simulated minutes takes milliseconds.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial

from gpuci_tui.core.command_types import Command
from gpuci_tui.core.engine.agent.output import (
    AgentFact,
    AwaitingGo,
    JobCompleted,
    Listening,
    RunningJob,
)
from gpuci_tui.core.engine.agent.steps import AgentSaid, GiveGo, GoGiven, ReadAgent
from gpuci_tui.core.engine.commands import apply_command
from gpuci_tui.core.engine.gpu_admission import FOREIGN_PROCESS, GateKind, GateReading
from gpuci_tui.core.engine.lifecycle import EngineState, Lane, lane_name, new_slot
from gpuci_tui.core.engine.planning.planner import decide
from gpuci_tui.core.engine.pool_view import PoolView
from gpuci_tui.core.engine.rollout.progress import advance, begin
from gpuci_tui.core.engine.server_steps import (
    AgentChecked,
    AgentWritten,
    CheckAgent,
    PoolRead,
    PoolUnread,
    ServerFailed,
    SetEnabled,
)
from gpuci_tui.core.engine.settings import SupervisorConfig
from gpuci_tui.core.engine.standby.auto import AutoStandby
from gpuci_tui.core.engine.steps import (
    Action,
    Destroyed,
    Died,
    FetchLogs,
    GpuObserved,
    LogTail,
    Observation,
    RemoveContainer,
    Removed,
    StartAgent,
    Started,
    StopAgent,
    Stopped,
)
from gpuci_tui.core.protocols import Agent, JobRequest

RULES = SupervisorConfig(backoff_base=1.0, backoff_max=4.0, park_after=50)
#: Seconds after a GPU turns bad within which a job may still be handed to its slot.
GATE_MARGIN = 8.0
HOLD_DOWN = 10.0
#: An agent's line reaches the engine up to this late.
LINE_LATE = 1.0


@dataclass
class Registration:
    """One agent registration on the server."""

    id: int
    name: str
    enabled: bool = True
    online: bool = False
    session: int | None = None
    """The container whose session is open."""
    job: int | None = None


@dataclass
class Box:
    """One container."""

    id: str
    slot: int
    lane: Lane
    name: str
    alive: bool = True
    job: int | None = None
    took_job: bool = False
    crash: bool = False
    removed: bool = False
    """Dead and removed: only then is its name free (no auto-remove)."""
    spec: str = ""
    registered: bool = False
    go: bool = False
    """The engine's go file is there (gated: only then does the agent open its session)."""


@dataclass
class World:
    """The outside systems, plus the engine driven against them."""

    seed: int
    slots: int = 2
    standby: bool | int = True
    """Standby lanes per slot (True: one), or with ``auto`` where "auto" starts."""
    auto: AutoStandby | None = None
    """``standby = "auto"``: the depth follows the queue (`engine.standby_auto`)."""
    register_delay: tuple[float, float] = (0.5, 6.0)
    session_delay: tuple[float, float] = (0.5, 3.0)
    job_length: tuple[float, float] = (1.0, 8.0)
    crash_rate: float = 0.05
    write_failure_rate: float = 0.05
    poll_interval: float = 10.0
    gated: bool = False
    """The image has the start gate: agents wait for the engine's go after registering."""
    missing_lines: float = 0.1
    """Share of the agents' lines that never reach the engine."""
    fake_lines: float = 0.2
    """Share of jobs that print a fake "completed" line halfway through."""
    gpu_faults: bool = False
    """Foreign processes come and go on the slots' GPUs; GPUs fail (Xid) and are cleared."""
    rng: random.Random = field(init=False)
    now: float = 0.0
    state: EngineState = field(init=False)
    regs: dict[str, Registration] = field(default_factory=dict)
    boxes: dict[str, Box] = field(default_factory=dict)
    queue: list[int] = field(default_factory=list)
    done: list[int] = field(default_factory=list)
    running: dict[int, dict[int, Lane]] = field(default_factory=dict)
    """Per slot: request id → the lane whose container runs it."""
    _events: list[tuple[float, int, Callable[[], None]]] = field(default_factory=list)
    _seq: itertools.count[int] = field(default_factory=itertools.count)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _jobs: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))
    _feed_until: float = 0.0
    _plans: int = 0
    """Plans made so far: a wake-up set by an older plan than the last is dropped."""
    foreign: dict[int, float] = field(default_factory=dict)
    """Per slot: since when a foreign process holds its GPU."""
    broken: dict[int, float] = field(default_factory=dict)
    """Per slot: since when its GPU is failing (until an operator clears it)."""
    held_jobs: int = 0
    """Jobs handed to a slot within `GATE_MARGIN` of its GPU turning bad (allowed, counted)."""
    reloads: bool = False
    """The agent spec changes now and then (`_reloader`); specs in `bad_specs` never start."""
    bad_specs: set[str] = field(default_factory=set)
    specs: list[str] = field(default_factory=list)
    """Every spec reloaded to, in order."""
    lost_jobs: int = 0
    """Jobs whose container ended other than by finishing (a stop or a crash during a job)."""
    outages: bool = False
    """Every call of the daemon is refused now and then, for 10-60 s (`refusing`)."""
    refused: list[tuple[float, float]] = field(default_factory=list)
    """The windows (start, end) in which the organisation refuses every call."""
    refused_jobs: int = 0
    """Jobs handed out while the organisation refused the daemon's calls."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        slots = tuple(new_slot("h", n) for n in range(self.slots))
        self.state = EngineState(
            "h", self.slots, slots, standby=self.standby, spec="s0", auto=self.auto
        )
        self.running = {n: {} for n in range(self.slots)}

    # ------------------------------------------------------------------ the clock

    def at(self, delay: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._events, (self.now + delay, next(self._seq), fn))

    def run(self, until: float, *, jobs_every: float = 2.0, commands: bool = True) -> None:
        """Feed jobs and (optionally) random operator commands until ``until``."""
        self.at(0.0, self._read)
        self._feed(jobs_every, until)
        if commands:
            self._operator(until)
        if self.reloads:
            self._reloader(until)
        if self.gpu_faults:
            self._gpu_chaos(until)
            self.at(0.0, self._gpu_frame)
        if self.outages:
            t = 20.0
            while (t := t + self.rng.uniform(30.0, 120.0)) < until - 120:
                self.refused.append((t, t + self.rng.uniform(10.0, 60.0)))
        self._plan()
        while self._events and self._events[0][0] <= until:
            self.now, _, fn = heapq.heappop(self._events)
            fn()
            self._dispatch()

    def settle(self, seconds: float) -> None:
        """Run on without new jobs (those queued are dropped) or commands."""
        self.queue.clear()
        self._feed_until = 0.0
        self.go(seconds)

    def go(self, seconds: float) -> None:
        """Run on for ``seconds``, queued jobs kept."""
        until = self.now + seconds
        self._dispatch()
        while self._events and self._events[0][0] <= until:
            self.now, _, fn = heapq.heappop(self._events)
            fn()
            self._dispatch()
        self.now = until

    def steady(self) -> list[str]:
        """Slots not in the steady state: one active lane (and a ready standby)."""
        problems = []
        for slot in self.state.slots:
            capable = [lane for lane in slot.lanes if lane.capable]
            standby = [lane for lane in slot.lanes if lane.live and not lane.capable]
            if len(capable) != 1 or len(standby) != int(self.state.standby):
                problems.append(f"slot {slot.number}: {slot}")
        return problems

    # ------------------------------------------------------------------ the engine

    def observe(self, obs: Observation) -> None:
        self.state = advance(self.state, obs, RULES).state
        self._plan()

    def _plan(self) -> None:
        self.state, plan = decide(self.state, self.now)
        for action in plan.actions:
            self._carry_out(action)
        # Like the supervisor's loop: one wake-up, the latest plan's. Its `wake_at` is the
        # earliest time anything in the state is due, so an older plan's wake-up is only
        # ever early or the same; keeping every one made "auto" plan 3.5 times as often
        # (each plan moves its hold-down's end) for nothing the daemon does.
        self._plans += 1
        if plan.wake_at is not None:
            self.at(max(0.0, plan.wake_at - self.now), partial(self._wake, self._plans))

    def _wake(self, plan: int) -> None:
        if plan == self._plans:  # no plan since the one that asked for this wake-up
            self._plan()

    def command(self, command: Command) -> None:
        self.state, _ = apply_command(self.state, command)
        self._plan()

    # ------------------------------------------------------------------ actions

    def _carry_out(self, action: Action) -> None:
        latency = self.rng.uniform(0.01, 0.3)
        if isinstance(action, StartAgent):
            self.at(latency, lambda: self._start(action))
        elif isinstance(action, StopAgent):
            box = self.boxes[action.container_id]
            assert box.job is None, f"stop of {box.name} while it runs job {box.job}"
            self.at(latency, lambda: self._stopped(action, box))
        elif isinstance(action, RemoveContainer):
            self.at(latency, lambda: self._remove(action))
        elif isinstance(action, SetEnabled | CheckAgent | ReadAgent):
            self.at(latency, lambda: self._server(action))
        elif isinstance(action, GiveGo):
            self.at(latency, lambda: self._give_go(action))
        elif isinstance(action, FetchLogs):
            self.at(latency, lambda: self.observe(LogTail(action.slot, action.container_id, ())))
        else:
            raise AssertionError(action)

    def _remove(self, action: RemoveContainer) -> None:
        """No auto-remove: a dead container goes (and frees its name) when the engine asks."""
        box = self.boxes.get(action.container_id)
        assert box is None or not box.alive, f"removal of the live container {box.name}"
        if box is not None:
            box.removed = True
        self.observe(Removed(action.slot, action.lane, action.container_id))
        self.at(0.01, lambda: self.observe(
            Destroyed(action.slot, action.lane, action.container_id, self.now)))  # fmt: skip

    def _start(self, action: StartAgent) -> None:
        name = lane_name("h", action.slot, action.lane)
        # Docker refuses a name that a live container or an unremoved dead one still holds.
        assert not any(not b.removed and b.name == name for b in self.boxes.values()), name
        box = Box(f"c{next(self._ids)}", action.slot, action.lane, name, spec=action.spec)
        box.crash = self.rng.random() < self.crash_rate or action.spec in self.bad_specs
        self.boxes[box.id] = box
        started = Started(action.slot, action.lane, box.id, self.now, spec=action.spec,
                          gated=self.gated)  # fmt: skip
        self.observe(started)
        if box.crash:
            self.at(self.rng.uniform(0.1, 2.0), lambda: self._exit(box, 1))
            return
        self.at(self.rng.uniform(*self.register_delay), lambda: self._register(box))

    def _register(self, box: Box) -> None:
        if not box.alive:
            return
        reg = self.regs.get(box.name)
        if reg is None:  # a new name registers enabled
            reg = self.regs[box.name] = Registration(next(self._ids), box.name)
        else:  # --replace keeps the id and the enabled flag, ends the old session
            assert reg.job is None or reg.session == box.id, "replace of a busy registration"
            reg.online, reg.session = False, None
        box.registered = True
        if self.gated:
            self._say(box, AwaitingGo(box.name, "/run/azp/go"))
            if not box.go:
                return  # start.sh waits for the engine's go (`_give_go`)
        self.at(self.rng.uniform(*self.session_delay), lambda: self._session(box, reg))

    def _session(self, box: Box, reg: Registration) -> None:
        if box.alive and reg.session is None:
            reg.online, reg.session = True, box.id  # type: ignore[assignment]
            self._say(box, Listening(self.now))

    def _give_go(self, action: GiveGo) -> None:
        box = self.boxes[action.container_id]
        if not box.alive or self.rng.random() < self.write_failure_rate:
            self.observe(GoGiven(action.slot, action.lane, box.id, self.now, "not running"))
            return
        first, box.go = not box.go, True
        reg = self.regs.get(box.name)
        if first and box.registered and reg is not None:
            self.at(self.rng.uniform(*self.session_delay), lambda: self._session(box, reg))
        self.observe(GoGiven(action.slot, action.lane, box.id, self.now))

    def _say(self, box: Box, fact: AgentFact) -> None:
        """The agent prints a line: the engine reads it a little later, or never."""
        if self.rng.random() < self.missing_lines:
            return
        self.at(self.rng.uniform(0.01, LINE_LATE), lambda: self.observe(
            AgentSaid(box.slot, box.lane, box.id, fact, self.now)))  # fmt: skip

    def _stopped(self, action: StopAgent, box: Box) -> None:
        self.observe(Stopped(action.slot, action.lane))
        if box.alive:
            assert box.job is None, f"SIGTERM reached {box.name} during job {box.job}"
            self.at(0.05, lambda: self._exit(box, 143))

    def _exit(self, box: Box, code: int) -> None:
        if not box.alive:
            return
        box.alive = False
        reg = self.regs.get(box.name)
        if reg is not None and reg.session == box.id:
            reg.online, reg.session, reg.job = False, None, None
        if box.job is not None:
            self.lost_jobs += code != 0
            self.running[box.slot].pop(box.job, None)
            self.done.append(box.job)
            box.job = None
        self.at(0.03, lambda: self.observe(Died(box.slot, box.lane, box.id, code, self.now)))

    def refusing(self) -> bool:
        """The organisation refuses every call of the daemon now (its agents go on)."""
        return any(start <= self.now < end for start, end in self.refused)

    def _server(self, action: SetEnabled | CheckAgent | ReadAgent) -> None:
        if self.refusing():
            self.observe(ServerFailed(action.slot, action.lane, "HTTP 429", self.now + 5.0))
            return
        if isinstance(action, ReadAgent):
            named = self.regs.get(action.name)
            if self.rng.random() < self.write_failure_rate:
                self.observe(ServerFailed(action.slot, action.lane, "HTTP 500", self.now + 2.0))
                return
            agent = self._agent(named, True) if named is not None else None
            self.observe(AgentChecked(action.slot, action.lane, agent, self.now))
            return
        reg = next((r for r in self.regs.values() if r.id == action.agent_id), None)
        if self.rng.random() < self.write_failure_rate or reg is None:
            self.observe(ServerFailed(action.slot, action.lane, "HTTP 500", self.now + 2.0,
                                      gone=reg is None))  # fmt: skip
            return
        if isinstance(action, SetEnabled):
            reg.enabled = action.enabled
            self.observe(AgentWritten(action.slot, action.lane, self._agent(reg, False), self.now))
        else:
            self.observe(AgentChecked(action.slot, action.lane, self._agent(reg, True), self.now))

    # ------------------------------------------------------------------ the server

    def _agent(self, reg: Registration, with_job: bool) -> Agent:
        request = JobRequest(request_id=reg.job) if with_job and reg.job else None
        status = "online" if reg.online else "offline"
        return Agent(reg.id, reg.name, enabled=reg.enabled, status=status, assigned_request=request)

    def _read(self) -> None:
        """The periodic read (the host's read after each job end only confirms: left out)."""
        began = self.now
        if self.refusing():  # the observer backs off, then reads again
            self.at(0.1, lambda: self.observe(PoolUnread(began, began + 5.0, "HTTP 429")))
            self.at(5.0, self._read)
            return
        agents = tuple(self._agent(reg, True) for reg in self.regs.values())
        view = PoolView(pool_id=42, began_at=began, agents=agents, queued_jobs=len(self.queue))
        # The answer arrives a little later: the world may have moved on meanwhile.
        self.at(self.rng.uniform(0.05, 0.5), lambda: self.observe(PoolRead(view)))
        self.at(self.poll_interval, self._read)

    def _dispatch(self) -> None:
        for reg in self.regs.values():
            if not self.queue:
                return
            if not (reg.enabled and reg.online and reg.job is None and reg.session):
                continue
            box = self.boxes[str(reg.session)]
            if box.took_job or not box.alive:
                continue
            job = self.queue.pop(0)
            others = self.running[box.slot]
            bad = min(self.foreign.get(box.slot, 1e18), self.broken.get(box.slot, 1e18))
            assert self.now - bad < GATE_MARGIN, (
                f"t={self.now:.2f}: job {job} to {box.name} though its GPU is bad since {bad:.2f}"
            )
            self.held_jobs += self.now >= bad
            assert not others, (
                f"t={self.now:.2f}: job {job} to {box.name} while slot {box.slot} runs {others}"
            )
            reg.job = box.job = job
            box.took_job = True
            self.refused_jobs += self.refusing()
            others[job] = box.lane
            self._say(box, RunningJob(f"job {job}", self.now))
            length = self.rng.uniform(*self.job_length)
            if self.rng.random() < self.fake_lines:  # the job prints what only the agent should
                fake = JobCompleted(f"job {job}", "Succeeded", self.now)
                self.at(length / 2, lambda b=box, f=fake: b.alive and self._say(b, f))
            self.at(length, lambda b=box: self._exit(b, 0))

    # ------------------------------------------------------------------ load and operator

    def _feed(self, every: float, until: float) -> None:
        self._feed_until = until
        t = 0.0
        while t < until:
            t += self.rng.expovariate(1 / every)
            self.at(t, self._new_job)

    def _new_job(self) -> None:
        if self.now <= self._feed_until:
            self.queue.append(next(self._jobs))

    def _operator(self, until: float) -> None:
        from gpuci_tui.core.command_types import Drain, Restart, Resume, Scale

        t = 30.0
        while (t := t + self.rng.uniform(20.0, 80.0)) < until - 60:
            slot = self.rng.randrange(self.slots)
            pick = self.rng.choice(
                [Drain((slot,)), Resume((slot,)), Restart((slot,)), Restart(None),
                 Resume(None), Scale(self.slots), Scale(max(1, self.slots - 1))]
            )  # fmt: skip
            self.at(t, lambda c=pick: self.command(c))
        self.at(until - 60, lambda: self.command(Resume(None)))
        self.at(until - 60, lambda: self.command(Scale(self.slots)))

    # ------------------------------------------------------------------ reloads

    def _reloader(self, until: float) -> None:
        """A new spec every 60-150 s (a third never start), with 0 to all slots as canaries."""
        t = 20.0
        while (t := t + self.rng.uniform(60.0, 150.0)) < until - 60:
            self.at(t, self.reload)

    def reload(self, *, bad: bool | None = None, canary: int | None = None) -> None:
        spec = f"s{len(self.specs) + 1}"
        self.specs.append(spec)
        if bad if bad is not None else self.rng.random() < 0.33:
            self.bad_specs.add(spec)
        canary = self.rng.randrange(self.slots + 1) if canary is None else canary
        self.state, _ = begin(self.state, spec, image_from="v-old", image_to=spec, canary=canary,
                              canary_jobs=self.rng.choice([1, 2]), at=self.now)  # fmt: skip
        self._plan()

    def outdated(self) -> list[str]:
        """Live containers that do not run their slot's target spec."""
        return [
            f"{box.name} on {box.spec}, target {self.state.target_spec(box.slot)}"
            for box in self.boxes.values()
            if box.alive and box.spec != self.state.target_spec(box.slot)
        ]

    # ------------------------------------------------------------------ GPUs

    def _gpu_frame(self) -> None:
        readings = []
        for slot in range(self.slots):
            if slot in self.broken:
                fresh = self.now - self.broken[slot] < 1.0
                reading = GateReading(GateKind.QUARANTINED, "Xid 79", "xid", (79,) if fresh else ())
            elif slot in self.foreign:
                reading = GateReading(GateKind.HELD, "pid 4242", FOREIGN_PROCESS)
            else:
                reading = GateReading()
            readings.append((slot, reading))
        self.observe(GpuObserved(self.now, tuple(readings), HOLD_DOWN))
        self.at(1.0, self._gpu_frame)

    def _gpu_chaos(self, until: float) -> None:
        """Foreign processes (1-40 s, some flapping) and failures, all over by ``until - 60``."""
        t = 5.0
        while (t := t + self.rng.uniform(5.0, 40.0)) < until - 120:
            slot = self.rng.randrange(self.slots)
            if self.rng.random() < 0.15:
                self.at(t, lambda s=slot: self.broken.setdefault(s, self.now))
                self.at(t + self.rng.uniform(10.0, 60.0), lambda s=slot: self.broken.pop(s, None))
                continue
            for _ in range(self.rng.choice([1, 1, 3])):  # sometimes it flaps
                length = self.rng.uniform(1.0, 40.0)
                self.at(t, lambda s=slot: self.foreign.setdefault(s, self.now))
                self.at(t + length, lambda s=slot: self.foreign.pop(s, None))
                t += length + self.rng.uniform(0.5, 3.0)

    def with_state(self, **changes: object) -> None:
        self.state = replace(self.state, **changes)  # type: ignore[arg-type]
