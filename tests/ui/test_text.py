"""The pure wording and formatting helpers behind the panels and the confirmations."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuci_tui.core.command_types import Drain, Restart, Scale, Stop
from gpuci_tui.core.engine.preview import preview
from gpuci_tui.core.models import AgentSnapshot, ExitInfo, JobInfo, SlotSnapshot, SlotState
from gpuci_tui.screens.prompts import (
    drain_all_prompt,
    drain_prompt,
    quit_body,
    restart_prompt,
    scale_down_prompt,
)
from gpuci_tui.widgets.agents_table import slot_detail
from gpuci_tui.widgets.format import ago, duration, exit_label, job_label, until
from gpuci_tui.widgets.gpu_panel import spark
from gpuci_tui.widgets.status_bar import org_label
from tests.ui.scenarios import NOW, loaded_snapshot


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0, "0s"),
        (59.9, "59s"),
        (61, "1m01s"),
        (3600 * 3 + 120, "3h02m"),
        (86400 * 2 + 3600 * 4, "2d04h"),
    ],
)
def test_duration(seconds: float | None, text: str) -> None:
    assert duration(seconds) == text


def test_ages_and_countdowns() -> None:
    assert ago(None, NOW) == "never"
    assert ago(NOW - 1, NOW) == "just now"
    assert ago(NOW - 12, NOW) == "12 s ago"
    assert ago(NOW - 600, NOW) == "10 min ago"
    assert ago(NOW - 3 * 3600, NOW) == "3 h ago"
    assert until(NOW + 11.2, NOW) == "in 12 s"
    assert until(NOW + 300, NOW) == "in 5 min"
    assert until(NOW - 5, NOW) == "now"


def test_job_label_keeps_the_run_number_when_cut() -> None:
    job = JobInfo(7, "inference-bench - main", "20261122.1")
    assert job_label(job) == "'inference-bench - main' 20261122.1"
    assert job_label(job, 26) == "'inference-be…' 20261122.1"
    assert len(job_label(job, 26)) == 26
    assert job_label(JobInfo(8), 26) == "request 8"
    assert job_label(None) == "-"


def test_exit_label_says_the_code_once() -> None:
    assert exit_label(ExitInfo(code=0, reason="exited 0")).plain == "0 exited"
    assert exit_label(ExitInfo(code=2, reason="exit code 2: misuse")).plain == "2 misuse"
    assert exit_label(ExitInfo(code=0, reason="job finished")).plain == "0 job finished"


def test_a_slot_detail_says_its_state_once() -> None:
    slot = SlotSnapshot(slot=1, name="ceo-fl1-1", state=SlotState.DRAINED, message="drained")
    assert slot_detail(slot, NOW).plain == "ceo-fl1-1 drained"
    exited = replace(slot, last_exit=ExitInfo(code=0, reason="exited 0"))
    assert slot_detail(exited, NOW).plain == "ceo-fl1-1 drained · last exit 0 exited"


def test_a_slot_detail_ends_with_the_image_it_runs() -> None:
    image_id = "sha256:3f2a1b9c0d4e" + "0" * 52
    digest = "reg:5000/agent@sha256:abcdef123456" + "1" * 52
    runs = AgentSnapshot("a", "h-0", "ready", image="reg:5000/agent:1", image_id=image_id)
    slot = SlotSnapshot(
        slot=0, name="h-0", state=SlotState.IDLE, agents=(runs,), image="reg:5000/agent:1",
        image_id=image_id, repo_digest=digest,
    )  # fmt: skip
    assert slot_detail(slot, NOW).plain.endswith(
        " · image reg:5000/agent:1 (id 3f2a1b9c0d4e, digest sha256:abcdef123456) · start gate no"
    )
    # A lane still on an older image than the configured one says both.
    moved = replace(
        slot, image="reg:5000/agent:2", repo_digest="", agents=(replace(runs, start_gate=True),)
    )
    assert slot_detail(moved, NOW).plain.endswith(
        " · image reg:5000/agent:1 (id 3f2a1b9c0d4e) (configured: reg:5000/agent:2)"
        " · start gate yes"
    )
    assert "image" not in slot_detail(replace(slot, image_id=""), NOW).plain


def test_exit_label_flags_oom() -> None:
    assert exit_label(ExitInfo(code=137, oom=True, reason="killed: out of memory")).plain == (
        "137 OOM killed: out of memory"
    )
    assert exit_label(ExitInfo(code=None)).plain == "?"


def test_spark_uses_a_fixed_scale() -> None:
    assert spark([0, 50, 100, None], 6).plain == "  ▁▅█·"
    assert spark([50.0] * 10, 4).plain == "▅▅▅▅", "a steady load is a flat line, not a saw-tooth"


def test_org_label() -> None:
    assert org_label("https://dev.azure.com/contoso/") == "dev.azure.com/contoso"


def test_scale_down_names_the_highest_slots_whatever_the_first_number() -> None:
    snapshot = loaded_snapshot()
    zero_based = replace(snapshot, slots=tuple(replace(s, slot=s.slot - 1) for s in snapshot.slots))
    for snap in (snapshot, zero_based):
        first = min(s.slot for s in snap.slots)
        answer = preview(snap, Scale(first + 4))
        prompt = scale_down_prompt(answer, 6, 4)
        assert prompt.title == "Scale down to 4 agents?"
        assert prompt.body.startswith("gpuhost-5 (backoff), gpuhost-6 (parked) will be drained")
    busy = scale_down_prompt(preview(snapshot, Scale(1)), 6, 0)
    assert "gpuhost-1 (busy with 'train - main' 20261122.3: finishes it first)" in busy.body


def test_prompts_for_slots_without_a_container() -> None:
    parked = SlotSnapshot(slot=3, name="gpuhost-3", state=SlotState.PARKED)
    snap = loaded_snapshot(slots=(parked,))
    assert drain_prompt(preview(snap, Drain((3,)))).body.startswith(
        "No container runs in this slot"
    )
    assert (
        restart_prompt(preview(snap, Restart((3,)))).body
        == "No container runs in this slot (parked): a fresh agent is started now."
    )


def test_prompts_without_standby_speak_of_one_agent() -> None:
    idle = replace(loaded_snapshot().slots[1], standby="")
    snap = loaded_snapshot(slots=(idle,))
    assert drain_prompt(preview(snap, Drain((idle.slot,)))).body == (
        "It is idle: it is disabled on the server and its container is stopped now, so it takes "
        "no new job. Nothing replaces it until you resume it (u)."
    )
    assert restart_prompt(preview(snap, Restart((idle.slot,)))).body == (
        "It is idle: its container is stopped and a fresh agent replaces it now."
    )


def test_prompts_mention_the_standby_that_shares_the_slots_fate() -> None:
    idle = replace(loaded_snapshot().slots[1], standby="ready")
    busy = replace(loaded_snapshot().slots[0], standby="booting")
    snap = loaded_snapshot(slots=(busy, idle))
    assert "it and its standby agent are disabled on the server and stopped now" in (
        drain_prompt(preview(snap, Drain((idle.slot,)))).body
    )
    assert "Its standby agent is stopped now. No job is killed." in (
        drain_prompt(preview(snap, Drain((busy.slot,)))).body
    )
    assert "2 standby agents stop now" in drain_all_prompt(preview(snap, Drain(None))).body
    assert "hands over and is replaced, so the slot keeps taking jobs" in (
        restart_prompt(preview(snap, Restart((idle.slot,)))).body
    )


def test_quit_body_depends_on_where_the_supervisor_runs() -> None:
    assert "never stops it" in quit_body(loaded_snapshot(pid=99), "daemon")
    assert "(gpuci-tui run, pid 99)" in quit_body(loaded_snapshot(pid=99), "daemon")
    assert "stops with it" in quit_body(None, "in-process")
    snap = loaded_snapshot()
    body = quit_body(snap, "in-process", preview(snap, Stop()))
    assert "busy agents finish their current job" in body


def test_cli_and_console_share_one_duration() -> None:
    from gpuci_tui.cli import render
    from gpuci_tui.core import formatting
    from gpuci_tui.widgets import format as widget_format

    assert render.duration is formatting.duration is widget_format.duration
    assert formatting.duration(-5) == "-"
    assert formatting.duration(86400 * 12 + 3600) == "12d01h"
