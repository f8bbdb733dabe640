"""What an agent container says of itself: its output lines, read as facts (pure).

The Azure Pipelines agent (Agent.Listener) prints one line at each step of its
life, behind a UTC timestamp ``YYYY-MM-DD HH:MM:SSZ: ``:

* ``Listening for Jobs``: its session is open (registered and online);
* ``Running job: NAME``: the server handed it the job NAME;
* ``Job NAME completed with result: Succeeded`` (or ``Failed``, ``Canceled``).

dockeragent/start.sh adds one of its own on images with the start gate: once
config.sh has registered the agent, and before run.sh may start it,
``[start.sh] registered as NAME; waiting for the go file PATH``.

A job can write anything to a file descriptor it reaches, the container's
output included, so every fact here is a *hint*: only a line that begins with
the agent's own timestamp (or start.sh's prefix) counts, and even then the
engine never enables a lane on one (`transitions.output`). Parsing is bounded:
a line is looked at only up to `MAX_LINE` characters.
"""

from __future__ import annotations

import re
from calendar import timegm
from dataclasses import dataclass

#: Characters of a line looked at (a job may print megabytes on one line).
MAX_LINE = 1024

_STAMPED = re.compile(r"(\d{4})-(\d\d)-(\d\d)T? ?(\d\d):(\d\d):(\d\d)Z: (.*)")
_RUNNING = re.compile(r"Running job: (.+)")
_COMPLETED = re.compile(r"Job (.+) completed with result: ([A-Za-z]+)")
_AWAITING_GO = re.compile(r"\[start\.sh\] registered as (\S+); waiting for the go file (\S+)")


@dataclass(frozen=True)
class Listening:
    """``Listening for Jobs``: the agent's session is open, it is online."""

    stamp: float
    """The line's own time (Unix seconds, whole seconds)."""


@dataclass(frozen=True)
class RunningJob:
    """``Running job: NAME``: the agent was handed the job ``name``."""

    name: str
    stamp: float


@dataclass(frozen=True)
class JobCompleted:
    """``Job NAME completed with result: RESULT``: the agent says its job ended."""

    name: str
    result: str
    """As printed: ``Succeeded``, ``Failed``, ``Canceled``, …"""
    stamp: float


@dataclass(frozen=True)
class AwaitingGo:
    """start.sh registered the agent ``name`` and waits for the daemon's go (``path``)."""

    name: str
    path: str


AgentFact = Listening | RunningJob | JobCompleted | AwaitingGo


def parse_line(line: str) -> AgentFact | None:
    """The fact one output line states, or None for any other line."""
    text = line[:MAX_LINE].rstrip("\r\n")
    if text.startswith("[start.sh] "):
        awaiting = _AWAITING_GO.fullmatch(text)
        return AwaitingGo(awaiting[1], awaiting[2]) if awaiting else None
    stamped = _STAMPED.fullmatch(text)
    if stamped is None:
        return None
    try:
        stamp = float(timegm(tuple(int(part) for part in stamped.groups()[:6]) + (0, 0, 0)))
    except (OverflowError, ValueError):
        return None
    message = stamped[7]
    if message == "Listening for Jobs":
        return Listening(stamp)
    if running := _RUNNING.fullmatch(message):
        return RunningJob(running[1], stamp)
    if completed := _COMPLETED.fullmatch(message):
        return JobCompleted(completed[1], completed[2], stamp)
    return None
