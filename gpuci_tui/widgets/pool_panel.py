"""The pool as Azure DevOps sees it (our agents, or all of them) and Docker's health.

The subtitle says what the daemon's calls cost the organisation: its calls per
minute and, once the service has sent it, the identity's budget left.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.reactive import var
from textual.widget import Widget

from gpuci_tui.core.formatting import byte_size
from gpuci_tui.core.models import HealthState, PoolSummary, SupervisorSnapshot
from gpuci_tui.core.wording import NOT_READ_YET, disabled_reasons, override_words, rollout_words
from gpuci_tui.widgets.format import ago, cut_text, until

_HEALTH_STYLE = {
    HealthState.OK: "green",
    HealthState.UNKNOWN: "bright_black",
    HealthState.RATE_LIMITED: "yellow",
}
_DISK_STYLE = {"low": "yellow", "critical": "bold red"}
_ROLLOUT_STYLE = {"rolled_back": "bold red", "done": "green", "canary": "yellow"}


class PoolPanel(Widget):
    """Agents online/offline/disabled, jobs queued/running, Docker and API budget."""

    snapshot: var[SupervisorSnapshot | None] = var(None, init=False)
    """The supervisor's last snapshot (the dashboard binds it to its own)."""

    def __init__(self, *, clock: Callable[[], float], id: str | None = None) -> None:
        """Create the panel.

        Args:
            clock: Wall clock for ages.
            id: Widget id.
        """
        super().__init__(id=id)
        self.border_title = "Pool"
        self._clock = clock

    def watch_snapshot(self, snapshot: SupervisorSnapshot | None) -> None:
        """Render a new snapshot."""
        if snapshot is None:
            return
        self._title(snapshot)
        self.border_subtitle = calls_subtitle(snapshot)
        # layout=True: the panel is as tall as its lines, and the disabled line comes
        # and goes (a plain refresh would cut the docker line off below it). Textual keeps
        # the content height per width: without clearing it, a line added at the same
        # width (stale, waiting, a roll-out) is cut off at the bottom.
        self.clear_cached_dimensions()
        self.refresh(layout=True)

    def tick(self) -> None:
        """The clock moved on: the ages in the title and the lines."""
        if self.snapshot is not None:
            self._title(self.snapshot)
        self.refresh()

    def _title(self, snapshot: SupervisorSnapshot) -> None:
        """``Pool gpu-a100 #12 · 3 s ago``: the name and how old the agents' figures are.

        In the title, not on a line: at 80x24 every line of this panel is a line less
        for the agents and events below it.
        """
        if len(snapshot.pools) > 1:
            self.border_title = "Pools"
            return
        pool = snapshot.pool_summary
        ident = f" #{pool.pool_id}" if pool.pool_id is not None else ""
        read = f" · {ago(pool.read_at, self._clock())}" if pool.read_at is not None else ""
        # Text, not markup: a pool name may hold "[".
        self.border_title = Text(f"Pool {pool.name or snapshot.pool}{ident}{read}")

    def render(self) -> Text:
        """Render the pool summary."""
        snap = self.snapshot
        if snap is None:
            return Text("waiting for the supervisor…", style="bright_black")
        now = self._clock()
        lines = self._pool_lines(snap) if len(snap.pools) > 1 else self._one_pool(snap, now)
        # Jobs no agent can take say why (their demands), where the operator looks for the
        # queue. Wrapped, not cut: the demand at the end is the point of the line.
        pools = snap.pools if len(snap.pools) > 1 else (snap.pool_summary,)
        lines += [Text(f"waiting: {why}", style="yellow") for pool in pools for why in pool.waiting]
        lines.append(self._docker_line(snap, now, self.size.width))
        # A roll-out (`reload`) is shown while it goes on, and its end: done or rolled back.
        # Short (images by tag) and wrapped, not cut: the panel is narrow, the reason matters.
        lines.extend(
            Text(rollout_words(r, short=True), style=_ROLLOUT_STYLE.get(r.state, "cyan"))
            for r in snap.rollouts
        )
        lines.extend(Text(line, style="cyan") for line in snap.pulls)  # wrapped, not cut
        # What runs over the file (a scale, a pause, drains), beside the file's value.
        lines.extend(
            Text(f"override: {override_words(o, now)}", style="yellow") for o in snap.overrides
        )
        lines.extend(agent_version_line(snap))
        usage = snap.azure_usage
        if usage.held_last_minute:
            lines.append(
                Text(
                    f"cap {usage.cap_per_minute}/min: {usage.held_last_minute} calls held "
                    "back in the last minute (reads first)",
                    style="yellow",
                )
            )
        azure = snap.azure
        if azure.state not in (HealthState.OK, HealthState.UNKNOWN) and azure.message:
            lines.append(Text(f"azure: {azure.message}", style="red"))
        return Text("\n").join(lines)

    @staticmethod
    def _pool_lines(snap: SupervisorSnapshot) -> list[Text]:
        """Agent groups over several pools: one line per pool."""
        lines = []
        for pool in snap.pools:
            lines.append(
                Text.assemble(
                    (pool.name or "?", "bold"),
                    ("  on ", "bright_black"),
                    (str(pool.online), "green"),
                    ("  q ", "bright_black"),
                    (pool.queued_text, "bold yellow" if pool.queued_jobs else ""),
                    ("  run ", "bright_black"),
                    str(pool.running_jobs),
                    ("  sb ", "bright_black"),
                    (str(pool.standby), "green" if pool.standby else ""),
                    no_wrap=True,
                    overflow="ellipsis",
                )
            )
        return lines

    def _one_pool(self, snap: SupervisorSnapshot, now: float) -> list[Text]:
        pool = snap.pool_summary
        if pool.read_at is None and pool.pool_id is None:
            # Before the first read (the organisation unreachable, a slow start): no
            # zeros that look like facts.
            return [Text(f"pool {NOT_READ_YET}", style="bright_black")]
        if pool.jobs_read_at is None and pool.read_at is not None:
            queued = Text(f"queue {NOT_READ_YET}", style="bright_black")
        else:
            queued = Text.assemble(
                ("queued ", "bright_black"),
                # "200 or more" when the read was at the service's cap: never a made-up 200.
                (pool.queued_text, "bold yellow" if pool.queued_jobs else ""),
                # The queue is read less often than the rest: it says how old it is.
                # (The standbys are counted on the disabled line above.)
                (f" ({ago(pool.jobs_read_at, now)})" if pool.jobs_read_at else "", "bright_black"),
            )
        return [
            Text.assemble(
                # Only our lanes' agents were asked for: the counts are ours, not the pool's.
                ("ours: " if pool.ours_only else "", "bright_black"),
                ("online ", "bright_black"),
                (str(pool.online), "green"),
                ("  offline ", "bright_black"),
                str(pool.offline),
                ("  disabled ", "bright_black"),
                # Disabled by this host on purpose is no news: only the others get colour.
                (str(pool.disabled), "magenta" if pool.disabled_why.others else ""),
                no_wrap=True,
            ),
            *self._disabled_line(pool),
            # Ours, offline and backing no lane (x lists them); only shown when some are,
            # under the disabled breakdown, which belongs to the count above it.
            *(
                [
                    Text.assemble(
                        ("stale ", "bright_black"),
                        (str(len(snap.stale)), "yellow"),
                        (" (x lists them)", "bright_black"),
                    )
                ]  # fmt: skip
                if snap.stale
                else []
            ),
            Text.assemble(
                queued, ("  running ", "bright_black"), str(pool.running_jobs), no_wrap=True
            ),
        ]

    def _disabled_line(self, pool: PoolSummary) -> list[Text]:
        """Why the disabled agents are disabled (none when none is), under the count."""
        reasons = disabled_reasons(pool.disabled_why)
        if not reasons:
            return []
        line = Text("(", style="bright_black")
        for n, reason in enumerate(reasons):
            if n:
                line.append(" · ", style="bright_black")
            line.append(reason, style="magenta" if reason.endswith("not ours") else "")
        line.append(")", style="bright_black")
        # Cut and right-aligned here: the lines are joined into one Text, which
        # would wrap this one and drop its justification.
        width = self.size.width
        if width > 0:
            line = cut_text(line, width)
            line.pad_left(width - line.cell_len)
        return [line]

    @staticmethod
    def _docker_line(snap: SupervisorSnapshot, now: float, width: int = 0) -> Text:
        docker = snap.docker
        docker_line = Text("docker ", style="bright_black", no_wrap=True)
        docker_line.append(
            str(docker.state).replace("_", " "), _HEALTH_STYLE.get(docker.state, "bold red")
        )
        if docker.state is not HealthState.OK and docker.message:
            docker_line.append(f": {docker.message}", style="red")
        if docker.retry_at is not None and docker.state is not HealthState.OK:
            docker_line.append(f" (retry {until(docker.retry_at, now)})")
        disk = snap.disk
        disk_words = ""
        if disk.checked_at is not None and disk.free_bytes is not None:
            # Shown once a disk watch reads it; in colour only when it matters.
            disk_words = f" · disk {byte_size(disk.free_bytes)} free"
            if disk.state == "critical":
                disk_words += ": no pull starts"
        if docker.state is HealthState.OK and docker.checked_at is not None:
            # When the engine last answered (a ping keeps this fresh while nothing happens);
            # the first words to go when the panel is narrow: the disk figure matters more.
            answered = f" · answered {ago(docker.checked_at, now)}"
            if width and docker_line.cell_len + len(answered) + len(disk_words) > width:
                answered = f" · {ago(docker.checked_at, now)}"
            if not width or docker_line.cell_len + len(answered) + len(disk_words) <= width:
                docker_line.append(answered, style="bright_black")
        if disk_words:
            docker_line.append(disk_words, style=_DISK_STYLE.get(disk.state, "bright_black"))
        return docker_line


def calls_subtitle(snap: SupervisorSnapshot) -> str:
    """``12 calls/min · budget 184/200``: the daemon's rate, and the identity's budget when
    the service sent it; ``1234 API calls`` from a daemon that does not count by the minute.
    """
    usage = snap.azure_usage
    if usage.read_at is None:
        return f"{snap.azure_requests} API calls"
    text = f"{usage.requests_last_minute} calls/min"
    if usage.rate_limit_remaining is not None:
        of = f"/{usage.rate_limit_limit:g}" if usage.rate_limit_limit is not None else ""
        text += f" · budget {usage.rate_limit_remaining:g}{of}"
    return text


def agent_version_line(snap: SupervisorSnapshot) -> list[Text]:
    """``agent org 4.270.0 · image 4.264.2 · cached 4.270.0`` once the versions were read.

    Yellow when they differ (an agent would update itself first), with the first warning.
    """
    versions = snap.agent_versions
    if versions.checked_at is None:
        return []  # not watched (an older daemon, the demo without a cache): nothing to say
    style = "yellow" if versions.warnings else "bright_black"
    line = Text("agent ", style="bright_black", no_wrap=True, overflow="ellipsis")
    line.append(f"org {versions.org_version or '?'}", style=style)
    baked = sorted({i.baked or "?" for i in versions.images})
    if baked:
        line.append(f" · image {', '.join(baked)}", style=style)
    if versions.cached:
        line.append(f" · cached {versions.cached}", style="green")
    if versions.warnings:
        line.append(f": {versions.warnings[0]}", style="yellow")
    return [line]
