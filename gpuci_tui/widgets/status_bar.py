"""The two-line header: where we are, is the PAT healthy, how the supervisor runs.

It renders from the last `SupervisorSnapshot` (its ``snapshot``, which the
dashboard binds to its own) and the clock; the dashboard re-renders it every
second so "checked 12 s ago" stays true without new data.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.reactive import var
from textual.widget import Widget

from gpuci_tui.core.fleet.rows import daemon_started
from gpuci_tui.core.formatting import duration
from gpuci_tui.core.models import HealthSnapshot, HealthState, SlotState, SupervisorSnapshot
from gpuci_tui.widgets.format import ago, clock_time, cut_text, until

_RUNNING_STATES = frozenset(
    {SlotState.STARTING, SlotState.IDLE, SlotState.BUSY, SlotState.DRAINING}
)


def org_label(org_url: str) -> str:
    """``https://dev.azure.com/contoso/`` → ``dev.azure.com/contoso``."""
    text = org_url.split("://", 1)[-1]
    return text.rstrip("/")


def azure_health(health: HealthSnapshot, now: float, *, short: bool = False) -> Text:
    """The credential/organisation health as one styled phrase (``short``: for narrow bars)."""
    state = health.state
    who = health.identity  # empty: a PAT with nothing to say
    pat = not who or who.startswith("PAT")  # a PAT's identity text is its expiry warning
    if state is HealthState.OK:
        if who and pat:
            text = Text(f"⚠ {who}", style="bold yellow")  # works, but not for long
        else:
            text = Text(f"✓ {who}" if who else "✓ PAT valid", style="green")
    elif state is HealthState.AUTH_FAILED and health.pool_role:
        # Signed in, but may not register agents: say that, not "rejected".
        name = "PAT" if pat else who.split(" · ")[0]
        words = "not pool Administrator" if short else "is not the pool's Administrator"
        text = Text(f"✗ {name} {words}; agents wait", style="bold red")
    elif state is HealthState.AUTH_FAILED:
        text = Text(
            "✗ PAT rejected" if pat else f"✗ {who.split(' · ')[0]} refused", style="bold red"
        )
    elif state is HealthState.RATE_LIMITED:
        when = f" until {clock_time(health.retry_at)}" if health.retry_at else ""
        text = Text(f"⏳ rate limited{when}", style="yellow")
    elif state is HealthState.UNREACHABLE:
        retry = until(health.retry_at, now)
        text = Text("✗ Azure DevOps unreachable", style="bold red")
        if retry:
            text.append(f" (retry {retry})", style="red")
    elif state is HealthState.ERROR:
        text = Text("✗ Azure DevOps error", style="bold red")
    else:
        return Text("… PAT not checked yet", style="bright_black")
    if health.checked_at is not None:
        checked = ago(health.checked_at, now) if short else f"checked {ago(health.checked_at, now)}"
        text.append(f" · {checked}", style="bright_black")
    return text


def supervisor_label(
    snapshot: SupervisorSnapshot,
    *,
    uptime: float | None = None,
    short: bool = False,
    demo: bool = False,
) -> Text:
    """``daemon pid 1234 up 3h02m`` / ``in-process``, plus paused/draining/stopping.

    ``uptime``: the daemon's, worked out on its own clock (None: not known, not shown).
    A daemon is not called detached: one started by ``gpuci-tui run`` in a terminal is
    not, and the demo's (``demo``) runs in the demo's own process, so its pid is not told.
    """
    if snapshot.mode == "daemon":
        pid = f" pid {snapshot.pid}" if snapshot.pid and not demo else ""
        up = "" if uptime is None else f" up {duration(uptime)}"
        text = Text(f"{'demo ' if demo else ''}daemon{pid}{up}", style="cyan")
    else:
        text = Text("in-process", style="cyan")
    draining = sum(1 for s in snapshot.slots if s.state is SlotState.DRAINING)
    if snapshot.stopping:
        text.append(" · stopping", style="bold magenta")
    if snapshot.paused:
        text.append(" · paused" if short else " · paused (not replenishing)", style="bold yellow")
    if draining:
        text.append(f" · draining {draining}", style="magenta")
    return text


def health_line(
    snap: SupervisorSnapshot, now: float, uptime: float | None, width: int, *, demo: bool = False
) -> Text:
    """The header's second line in ``width`` cells: the Azure health, then the supervisor.

    The supervisor's part (its pid, its uptime, paused, draining) is never cut: on a
    narrow terminal the labels go first, then the Azure part is cut after a whole word.
    """
    line = Text.assemble(
        "Azure: ",
        azure_health(snap.azure, now),
        "   Supervisor: ",
        supervisor_label(snap, uptime=uptime, demo=demo),
    )
    if line.cell_len <= width:
        return line
    supervisor = supervisor_label(snap, uptime=uptime, short=True, demo=demo)
    gap = Text("  │  ", style="bright_black")
    room = width - supervisor.cell_len - gap.cell_len
    return Text.assemble(
        cut_text(azure_health(snap.azure, now, short=True), max(1, room)), gap, supervisor
    )


class StatusBar(Widget):
    """Header: organisation + pool, credential health, supervisor mode, badges."""

    snapshot: var[SupervisorSnapshot | None] = var(None, init=False)
    """The supervisor's last snapshot (None: none yet, the waiting message shows)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        readonly: bool,
        demo: bool,
        id: str | None = None,
    ) -> None:
        """Create the bar.

        Args:
            clock: Wall clock for the "checked … ago" ages.
            readonly: Show the READ-ONLY badge.
            demo: Show the DEMO badge.
            id: Widget id.
        """
        super().__init__(id=id)
        self._clock = clock
        self._readonly = readonly
        self._demo = demo
        self._daemon_since: float | None = None
        self._link_problem = ""
        self._waiting = "connecting to the supervisor…"

    def watch_snapshot(self, snapshot: SupervisorSnapshot | None) -> None:
        """Render a new snapshot (the connection is evidently fine)."""
        if snapshot is None:
            return
        # The daemon's start on this console's clock: its uptime keeps counting between
        # snapshots, and a skew between the two clocks does not enter it.
        self._daemon_since = daemon_started(snapshot, self._clock())
        self._link_problem = ""
        self.refresh()

    def show_link_problem(self, message: str) -> None:
        """Say the supervisor connection is lost (empty message: it is back)."""
        self._link_problem = message
        self.refresh()

    def show_waiting(self, message: str) -> None:
        """Say why there is no snapshot yet (no supervisor, starting…)."""
        self._waiting = message
        self.refresh()

    def _badges(self) -> Text:
        badges = Text(no_wrap=True)
        if self._demo:
            badges.append(" DEMO ", style="bold black on cyan")
            badges.append(" ")
        if self._readonly:
            badges.append(" READ-ONLY ", style="bold black on yellow")
        return badges

    def render(self) -> Text:
        """Two lines sized to the current width; badges never get cut."""
        width = max(20, self.size.width)
        now = self._clock()
        snap = self.snapshot
        right = self._badges()
        left = Text.assemble(("gpuci-tui", "bold"), "  ", no_wrap=True)
        if snap is not None:
            running = sum(1 for s in snap.slots if s.state in _RUNNING_STATES)
            left.append(org_label(snap.org_url))
            left.append(" · pool ", style="bright_black")
            left.append(snap.pool, style="bold")
            left.append(f"  agents {running}/{snap.desired_count}", style="bold")
            if snap.standby_depth not in ("", "1", "off"):
                # A deeper or "auto" standby: its depth now (and at the most).
                left.append(f"  standby {snap.standby_depth}", style="cyan")
        right_width = right.cell_len
        left = cut_text(left, max(0, width - right_width - 1))
        gap = max(1, width - left.cell_len - right_width)
        line1 = Text.assemble(left, " " * gap, right, no_wrap=True)

        if self._link_problem:
            line2 = Text(f"✗ supervisor: {self._link_problem}", style="bold red")
        elif snap is None:
            line2 = Text(self._waiting, style="bright_black")
        else:
            uptime = None if self._daemon_since is None else max(0.0, now - self._daemon_since)
            line2 = health_line(snap, now, uptime, width, demo=self._demo)
        line2.no_wrap = True
        line2.truncate(width, overflow="ellipsis")
        return Text.assemble(line1, "\n", line2)
