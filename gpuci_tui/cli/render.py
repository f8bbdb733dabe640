"""Plain-text rendering of snapshots for ``gpuci-tui status`` (no Rich: pipes and logs)."""

from __future__ import annotations

import time

from gpuci_tui.core.engine.snapshots import daemon_uptime
from gpuci_tui.core.formatting import ago, byte_size, duration, exit_label, image_label, job_label
from gpuci_tui.core.models import DiskSnapshot, PoolSummary, SupervisorSnapshot
from gpuci_tui.core.wording import (
    NOT_READ_YET,
    disabled_reasons,
    override_words,
    plural,
    rollout_words,
    usage_words,
)


def render_status(snap: SupervisorSnapshot, now: float | None = None) -> str:
    """The human form of ``status``."""
    now = time.time() if now is None else now
    mode = f"daemon pid {snap.pid}" if snap.mode == "daemon" else snap.mode
    daemon_up = daemon_uptime(snap)
    if daemon_up is not None:
        mode += f", up {duration(daemon_up)}"
    flags = [f for f, on in (("PAUSED", snap.paused), ("STOPPING", snap.stopping)) if on]
    # One standby per slot is the default: only a deeper (or "auto") one is spelled out.
    depth = f", standby {snap.standby_depth}" if snap.standby_depth not in ("", "1") else ""
    # A schedule that gives no standby now still says when it gives some.
    scheduled = snap.standby_depth.partition("; ")[2]
    standby = f"hot standby on{depth}" if snap.standby else "hot standby off"
    if scheduled and not snap.standby:
        standby += f"; {scheduled}"
    lines = [
        f"gpuci-tui {mode}{' ' + ' '.join(flags) if flags else ''} — {snap.org_url} pool "
        f"'{snap.pool}' — {plural(snap.desired_count, 'slot')}, {standby}",
        f"azure: {_health(snap.azure.state, snap.azure.message, snap.azure.checked_at, now)}"
        + (f" — {snap.azure.identity}" if snap.azure.identity else ""),
        f"  calls: {usage_words(snap.azure_usage, now)}",
        f"docker: {_health(snap.docker.state, snap.docker.message, snap.docker.checked_at, now)}",
        *_disk_lines(snap.disk, now),
        *_agent_version_lines(snap),
        *_gpu_lines(snap),
        *(_pool_line(p, snap, now) for p in (snap.pools or (snap.pool_summary,))),
        *(
            [
                f"stale registrations: {len(snap.stale)} (gpuci-tui agents prune --dry-run lists them)"
            ]
            if snap.stale
            else []
        ),
        *(f"  waiting: {why}" for p in (snap.pools or (snap.pool_summary,)) for why in p.waiting),
        *_group_lines(snap),
        *_image_lines(snap),
        *(f"rollout: {rollout_words(r)}" for r in snap.rollouts),
        *_override_lines(snap, now),
        *snap.pulls,  # one line per image: "pulling IMAGE: 3/7 layers, …"
        "",
    ]
    header = (
        "SLOT",
        "NAME",
        "STATE",
        "STANDBY",
        "CONTAINER",
        "AGENT",
        "JOB",
        "UPTIME",
        "LAST EXIT",
    )
    rows = [header]
    for slot in snap.slots:
        agent = "-"
        if slot.agent_id is not None:
            enabled = "" if slot.agent_enabled in (True, None) else " disabled"
            agent = f"#{slot.agent_id} {slot.agent_status or '?'}{enabled}"
        uptime = duration(now - slot.started_at) if slot.started_at else "-"
        rows.append(
            (
                slot.key,
                slot.name,
                slot.state.value,
                slot.standby or "-",
                (slot.container_id or "-")[:12],
                agent,
                job_label(slot.job),
                uptime,
                exit_label(slot.last_exit),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append("  ".join(cells + [row[-1]]).rstrip())
    for slot in snap.slots:
        if slot.message:
            lines.append(f"  {slot.name}: {slot.message}")
        if slot.state.value == "parked" and slot.last_exit and slot.last_exit.log_tail:
            lines.append(f"  {slot.name} last log lines:")
            lines.extend(f"    | {line}" for line in slot.last_exit.log_tail[-10:])
    return "\n".join(lines)


def _override_lines(snap: SupervisorSnapshot, now: float) -> list[str]:
    """``override: count 1, scaled at 10:02; the file says 3`` per override, and the way back."""
    if not snap.overrides:
        return []
    lines = [f"override: {override_words(o, now)}" for o in snap.overrides]
    return [*lines, "  (gpuci-tui reload --reset-overrides runs the file again)"]


def _disk_lines(disk: DiskSnapshot, now: float) -> list[str]:
    """``disk: ok (checked 5s ago): 80.0 GiB free on /var/lib/docker; …`` (when watched)."""
    if disk.checked_at is None:
        return []  # no disk watch (an older daemon, a test double): nothing to say
    limits = [f"hard floor {byte_size(disk.hard_floor_bytes)}"]
    if disk.min_free_bytes is not None:
        limits.insert(0, f"min_free {byte_size(disk.min_free_bytes)}")
    text = f"disk: {_health(disk.state, disk.message, disk.checked_at, now)} ({', '.join(limits)})"
    if disk.images_removed:
        text += f"; {plural(disk.images_removed, 'unused image')} removed"
    return [text]


def _agent_version_lines(snap: SupervisorSnapshot) -> list[str]:
    """``agents: organisation 4.270.0; image … has 4.264.2; cached package 4.270.0`` + warnings."""
    versions = snap.agent_versions
    if versions.checked_at is None:
        return []  # not watched: nothing to say
    parts = [f"organisation {versions.org_version or 'unknown'}"]
    for image in versions.images:
        group = f" (group {image.group})" if image.group else ""
        parts.append(f"image {image.image}{group} has {image.baked or 'an unknown version'}")
    if versions.cached:
        parts.append(
            f"cached package {versions.cached} (mounted into new containers of older images)"
        )
    lines = [f"agents: {'; '.join(parts)}"]
    lines += [f"  WARNING: {warning}" for warning in versions.warnings]
    if versions.message:
        lines.append(f"  agent package: {versions.message}")
    return lines


def _gpu_lines(snap: SupervisorSnapshot) -> list[str]:
    """``gpus: 0 ok, 1 held: GPU 1 used by pid …`` (admission and health, when watched)."""
    if not snap.gpu_gates:
        return []
    ok = [str(g.index) for g in snap.gpu_gates if g.state == "ok"]
    lines = [f"gpus: {', '.join(ok) or 'none'} ok"]
    lines += [f"  GPU {g.index} {g.state}: {g.reason}" for g in snap.gpu_gates if g.state != "ok"]
    if any(g.state == "quarantined" for g in snap.gpu_gates):
        lines.append("  (check the GPU, then: gpuci-tui gpu clear GPU)")
    return lines


def _pool_line(pool: PoolSummary, snap: SupervisorSnapshot, now: float) -> str:
    """``pool (read 3s ago): 5 online, …; jobs 3 queued (read 20s ago), 2 running``.

    Each figure says how old it is: the agents and the queue are read at different
    times. What has not been read yet says so, never a row of zeros. (A daemon from
    before the ages has read a pool it knows the id of: its figures show, ageless.)
    """
    name = f" '{pool.name}'" if snap.pools else ""
    if pool.read_at is None and pool.pool_id is None:
        return f"pool{name}: {NOT_READ_YET}"
    reasons = disabled_reasons(pool.disabled_why)
    why = f" ({', '.join(reasons)})" if reasons else ""
    read = f" (read {ago(pool.read_at, now, compact=True)})" if pool.read_at is not None else ""
    if pool.jobs_read_at is not None:
        queued = f"{pool.queued_text} queued (read {ago(pool.jobs_read_at, now, compact=True)})"
    elif pool.read_at is not None:
        queued = f"queue {NOT_READ_YET}"  # read less often than the agents
    else:
        queued = f"{pool.queued_text} queued"
    # The service was asked for our lanes only: say so, the counts are not the pool's.
    whose = " (ours)" if pool.ours_only else ""
    return (
        f"pool{name}{read}: {pool.online} online, {pool.offline} offline, {pool.disabled} disabled"
        f"{whose}{why}; jobs {queued}, {pool.running_jobs} running"
    )


def _group_lines(snap: SupervisorSnapshot) -> list[str]:
    if not snap.groups:
        return []
    described = ", ".join(
        f"{g.name} (pool '{g.pool}', {plural(g.desired_count, 'slot')}, agents {g.name_prefix}-*"
        f"{'' if g.standby else ', no standby'})"
        for g in snap.groups
    )
    return [f"groups: {described}"]


def _gate_words(seen: set[bool]) -> str:
    """``yes``, ``no``, or both when an image changed its label under running containers."""
    return "yes" if seen == {True} else "no" if seen == {False} else "yes on some lanes"


def _health(state: str, message: str, checked: float | None, now: float) -> str:
    text = str(state)
    if checked:
        text += f" (checked {ago(checked, now, compact=True)})"
    if message:
        text += f": {message}"
    return text


def _image_lines(snap: SupervisorSnapshot) -> list[str]:
    """Which image the lanes run, one line per distinct image; configured images run nowhere.

    Each says whether its containers wait for the daemon's go (the start gate):
    with it, a new registration may be made whenever a lane is wanted.
    """
    running: dict[tuple[str, str, str], int] = {}
    gated: dict[tuple[str, str, str], set[bool]] = {}
    for slot in snap.slots:
        for agent in slot.agents:
            if agent.container_id:
                key = (agent.image or slot.image, agent.image_id, agent.repo_digest)
                running[key] = running.get(key, 0) + 1
                gated.setdefault(key, set()).add(agent.start_gate)
    lines = [
        f"image: {image_label(*key)} on {plural(count, 'lane')}, "
        f"start gate: {_gate_words(gated[key])}"
        for key, count in sorted(running.items())
    ]
    shown = {key[0] for key in running}
    for configured in sorted({slot.image for slot in snap.slots if slot.image} - shown):
        lines.append(f"image: {configured} (configured; no container runs it)")
    return lines
