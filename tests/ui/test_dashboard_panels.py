"""The GPU cards, the pool panel and the event log: content, failures, never blocking."""

from __future__ import annotations

import threading
from dataclasses import replace

from textual.widgets import Static
from textual.widgets._toast import Toast

from gpuci_tui.app import make_app
from gpuci_tui.core.gpu_readings import GpuFrame
from gpuci_tui.core.models import (
    AgentVersionsSnapshot,
    AzureUsage,
    DisabledAgents,
    DiskSnapshot,
    HealthSnapshot,
    HealthState,
    ImageAgentVersion,
    PoolSummary,
    SupervisorEvent,
)
from gpuci_tui.screens.confirm import ConfirmScreen
from gpuci_tui.widgets.gpu_panel import GpuCard
from tests.ui.fakes import FakeHandle, FakeSampler, make_services
from tests.ui.helpers import ready, screen_text, wait_for
from tests.ui.scenarios import NO_GPU, NOW, gpu_frame, loaded_snapshot, measured_snapshot


async def test_gpu_cards_map_processes_to_agent_slots(handle: FakeHandle) -> None:
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(120, 50)) as pilot:
        screen = await ready(pilot)
        await wait_for(
            pilot, lambda: len(screen.gpu_panel.query(GpuCard)) == 4, what="four GPU cards"
        )
        screen.gpu_panel.show_frame(gpu_frame())  # with the owners of the snapshot now known
        await pilot.pause()
        cards = {card.index: card.render().plain for card in screen.gpu_panel.query(GpuCard)}
        assert "GPU0 NVIDIA A100-SXM4-80GB" in cards[0]
        assert "71°C  312/400 W" in cards[0]
        assert "88%" in cards[0] and "60.0/80.0 GiB" in cards[0]
        assert "pid 4242 python 56.6 GiB → gpuhost-1" in cards[0]
        assert "pid 5150 torchrun 19.3 GiB → gpuhost-3" in cards[2]
        assert "pid 777 jupyter 2.0 GiB → host process (not an agent)" in cards[3]
        assert "N/A" in cards[3] and "N/A/N/A GiB" in cards[3]
        assert screen.gpu_panel.border_title == "GPUs · 4× NVIDIA A100-SXM4-80GB"
        assert screen.gpu_panel.border_subtitle == "driver 580.82.07 · CUDA 13.0"


async def test_gpu_cards_are_one_line_each_on_short_terminals(handle: FakeHandle) -> None:
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await wait_for(pilot, lambda: len(screen.gpu_panel.query(GpuCard)) == 4)
        screen.gpu_panel.show_frame(gpu_frame())
        await pilot.pause()
        card = screen.gpu_panel.query_one("#gpu-0", GpuCard)
        assert card.size.height == 1
        line = card.render().plain
        assert line.startswith("0 ")
        assert line.endswith("88%  60/80G  71°C  312W gpuhost-1")
        # The figures line up whatever owns the GPU (an agent, nobody, a foreign process).
        lines = [c.render().plain for c in screen.gpu_panel.query(GpuCard)]
        assert len({line.index("%") for line in lines if "%" in line}) == 1
        assert len({line.index("W") for line in lines if "W" in line}) == 1, lines


async def test_sparkline_history_grows_with_samples(handle: FakeHandle) -> None:
    sampler = FakeSampler([gpu_frame(i) for i in range(8)])
    app = make_app(make_services(handle=handle, sampler=sampler, gpu_interval=0.01))
    async with app.run_test(size=(120, 50)) as pilot:
        screen = await ready(pilot)
        await wait_for(pilot, lambda: screen.gpu_frames >= 8, what="eight GPU samples")
        card = screen.gpu_panel.query_one("#gpu-2", GpuCard)
        assert len(card.history) >= 8
        history_line = card.render().plain.split("\n")[2]
        assert len(set(history_line.removeprefix("util history ").strip())) > 1, (
            "a varying load shows"
        )


async def test_no_gpu_reason_is_shown() -> None:
    handle = FakeHandle(loaded_snapshot())
    sampler = FakeSampler([GpuFrame(taken_at=NOW, host=NO_GPU)])
    app = make_app(make_services(handle=handle, sampler=sampler))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await wait_for(pilot, lambda: screen.gpu_frames >= 1)
        placeholder = screen.gpu_panel.query_one("#gpu-none", Static)
        assert placeholder.display
        assert str(placeholder.content) == (
            "No GPU visible: NVML library not found: no NVIDIA driver on this host"
        )


async def test_a_failing_sampler_does_not_break_the_console() -> None:
    class Broken(FakeSampler):
        def sample(self) -> GpuFrame:
            raise RuntimeError("driver went away")

    handle = FakeHandle(loaded_snapshot())
    app = make_app(make_services(handle=handle, sampler=Broken()))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await wait_for(pilot, lambda: screen.gpu_frames >= 1)
        placeholder = screen.gpu_panel.query_one("#gpu-none", Static)
        assert str(placeholder.content) == "No GPU visible: GPU sampling failed: driver went away"


async def test_a_blocked_sampler_never_blocks_keys() -> None:
    release = threading.Event()

    class Slow(FakeSampler):
        def sample(self) -> GpuFrame:
            release.wait(10)
            return super().sample()

    handle = FakeHandle(loaded_snapshot())
    app = make_app(make_services(handle=handle, sampler=Slow()))
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await ready(pilot)
            await pilot.press("d")
            await wait_for(
                pilot,
                lambda: isinstance(app.screen, ConfirmScreen),
                what="the dialog while sampling hangs",
            )
            release.set()
    finally:
        release.set()


async def test_pool_panel(handle: FakeHandle) -> None:
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        panel = screen.pool_panel
        text = panel.render().plain
        assert text.split("\n") == [
            "online 5  offline 2  disabled 5",
            "(2 busy · 1 leaving · 2 standby)".rjust(panel.size.width),
            "queued 3 (25 s ago)  running 3",
            "docker ok · answered 2 s ago",
        ]
        assert str(panel.border_title) == "Pool gpu-a100 #12 · 3 s ago", "the agents' age"
        assert panel.border_subtitle == "1234 API calls"


async def test_pool_panel_says_what_the_calls_cost_and_whose_agents_it_counts() -> None:
    """Our lanes only (the filtered read), a queue at the service's cap, the cap holding back."""
    loaded = loaded_snapshot()
    pool = replace(loaded.pool_summary, ours_only=True, queued_jobs=200, queued_capped=True)
    usage = AzureUsage(
        requests_last_minute=14,
        cap_per_minute=12,
        held_last_minute=3,
        rate_limit_remaining=180,
        rate_limit_limit=200,
        read_at=NOW,
    )
    app = make_app(
        make_services(handle=FakeHandle(replace(loaded, pool_summary=pool, azure_usage=usage)))
    )
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        panel = screen.pool_panel
        lines = panel.render().plain.split("\n")
        assert lines[0] == "ours: online 5  offline 2  disabled 5"
        assert lines[2].startswith("queued 200 or more (")
        assert "cap 12/min: 3 calls held back in the last minute (reads first)" in lines
        assert panel.border_subtitle == "14 calls/min · budget 180/200"


async def test_a_pool_never_read_is_not_read_yet_not_zeros() -> None:
    handle = FakeHandle(loaded_snapshot(pool_summary=PoolSummary(name="gpu-a100")))
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await ready(pilot)
        lines = screen.pool_panel.render().plain.split("\n")
        assert lines[0] == "pool not read yet"
        assert not any("online 0" in line or "queued 0" in line for line in lines)
        assert str(screen.pool_panel.border_title) == "Pool gpu-a100", "no age for no read"
        read = replace(loaded_snapshot().pool_summary, jobs_read_at=None)
        handle.push(loaded_snapshot(pool_summary=read))
        await wait_for(
            pilot,
            lambda: "queue not read yet  running 3" in screen.pool_panel.render().plain,
            what="the queue not read yet beside the agents read",
        )


async def test_pool_panel_says_only_what_is_disabled_and_cuts_it_to_fit() -> None:
    """No disabled agent: no breakdown line. Many reasons at 80 columns: cut, never wrapped."""
    quiet = replace(loaded_snapshot().pool_summary, disabled=0, disabled_why=DisabledAgents())
    handle = FakeHandle(loaded_snapshot(pool_summary=quiet))
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        assert [line.strip() for line in screen.pool_panel.render().plain.split("\n")][:2] == [
            "online 5  offline 2  disabled 0",
            "queued 3 (25 s ago)  running 3",
        ]
    why = DisabledAgents(busy=2, leaving=1, held=1, standby=2, idle=1, others=3)
    crowded = replace(quiet, disabled=10, disabled_why=why)
    handle = FakeHandle(loaded_snapshot(pool_summary=crowded))
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await ready(pilot)
        panel = screen.pool_panel
        lines = panel.render().plain.split("\n")
        assert len(lines) == 4
        assert lines[1].lstrip().startswith("(2 busy · 1 leaving") and lines[1].endswith("held…")
        assert len(lines[1]) == panel.size.width


async def test_pool_panel_shows_each_pool_of_the_agent_groups() -> None:
    pools = (
        PoolSummary(pool_id=12, name="cuda12", online=3, queued_jobs=2, running_jobs=2, standby=2),
        PoolSummary(pool_id=13, name="cuda13-team-b", online=2, running_jobs=1, standby=1),
    )
    handle = FakeHandle(loaded_snapshot(pools=pools))
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        text = screen.pool_panel.render().plain
        assert text.split("\n")[:2] == [
            "cuda12  on 3  q 2  run 2  sb 2",
            "cuda13-team-b  on 2  q 0  run 1  sb 1",
        ]
        assert screen.pool_panel.border_title == "Pools"


async def test_docker_trouble_shows_in_the_pool_panel() -> None:
    docker = HealthSnapshot(
        HealthState.UNREACHABLE, "permission denied on /var/run/docker.sock", retry_at=NOW + 5
    )
    handle = FakeHandle(loaded_snapshot(docker=docker))
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        assert "docker unreachable: permission denied on /var/run/docker.sock (retry in 5 s)" in (
            screen.pool_panel.render().plain
        )


async def test_dockers_free_space_shows_in_the_pool_panel_once_read() -> None:
    gib = 1024**3
    low = DiskSnapshot(state="critical", free_bytes=gib, checked_at=NOW - 1)
    handle = FakeHandle(loaded_snapshot(disk=low))
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        assert "· disk 1.0 GiB free: no pull starts" in screen.pool_panel.render().plain
        handle.push(loaded_snapshot(disk=replace(low, state="ok", free_bytes=80 * gib)))
        await wait_for(pilot, lambda: "· disk 80.0 GiB free" in screen.pool_panel.render().plain)
        assert "no pull starts" not in screen.pool_panel.render().plain
        handle.push(loaded_snapshot())  # no disk watch: nothing said
        await wait_for(pilot, lambda: "disk" not in screen.pool_panel.render().plain)


async def test_events_are_appended_with_slot_names(handle: FakeHandle) -> None:
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        handle.push(
            SupervisorEvent(
                at=NOW - 5, kind="job_finished", message="'train' [20261122.2] ok", slot=1
            )
        )
        handle.push(SupervisorEvent(at=NOW, kind="azure_error", message="HTTP 503"))
        await wait_for(pilot, lambda: screen.event_log.count == 2)
        text = screen_text(app)
        assert "08:26:35 gpuhost-1    job_finished     'train' [20261122.2] ok" in text
        assert "08:26:40              azure_error      HTTP 503" in text


async def test_notices_never_cover_the_events_log() -> None:
    app = make_app(make_services(handle=FakeHandle(measured_snapshot())))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen = await ready(pilot)
        app.notify("a notice long enough to take a few lines in its toast " * 2, timeout=30)
        await wait_for(pilot, lambda: bool(app.screen.query(Toast)), what="the toast")
        await pilot.pause()
        events = screen.event_log.region
        for toast in app.screen.query(Toast):
            assert not toast.region.overlaps(events), (toast.region, events)
            assert toast.region.y >= 2, "the status lines stay readable"


async def test_pool_panel_grows_when_the_disabled_line_appears() -> None:
    """A snapshot with no disabled agent, then one with: the docker line stays in view."""
    quiet = replace(loaded_snapshot().pool_summary, disabled=0, disabled_why=DisabledAgents())
    handle = FakeHandle(loaded_snapshot(pool_summary=quiet))
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot)
        await wait_for(pilot, lambda: "docker ok" in screen_text(pilot.app), what="docker line")
        handle.push(loaded_snapshot())

        def both_shown() -> bool:
            text = screen_text(pilot.app)
            return "2 standby)" in text and "docker ok" in text

        await wait_for(pilot, both_shown, what="the disabled line and the docker line")


async def test_a_job_no_agent_can_take_says_why_in_the_pool_panel() -> None:
    reason = "no agent with gpu.product = NVIDIA-A100-80GB-PCIe (1 job)"
    waiting = replace(loaded_snapshot().pool_summary, waiting=(reason,))
    handle = FakeHandle(loaded_snapshot(pool_summary=waiting))
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await ready(pilot)
        # Wrapped in the narrow panel, never cut: the demand is on screen whole.
        await wait_for(
            pilot,
            lambda: "NVIDIA-A100-80GB-PCIe" in screen_text(pilot.app),
            what="the waiting job's reason",
        )
        assert f"waiting: {reason}" in screen.pool_panel.render().plain


async def test_agent_versions_show_in_the_pool_panel_once_read() -> None:
    versions = AgentVersionsSnapshot(
        org_version="4.270.0",
        images=(ImageAgentVersion("", "gpuci-agent:1", "4.264.2"),),
        cached="4.270.0",
        warnings=("group 's image has agent 4.264.2; the organisation offers 4.270.0",),
        checked_at=NOW - 1,
    )
    handle = FakeHandle(loaded_snapshot(agent_versions=versions))
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(200, 30)) as pilot:
        screen = await ready(pilot)
        text = screen.pool_panel.render().plain
        assert "agent org 4.270.0 · image 4.264.2 · cached 4.270.0: group 's image has" in text
        handle.push(loaded_snapshot())  # not watched: nothing said
        await wait_for(pilot, lambda: "agent org" not in screen.pool_panel.render().plain)


async def test_the_pool_panel_grows_with_its_lines_and_is_never_cut() -> None:
    """A waiting job's reason (wrapped), the stale count and the docker line all fit:
    the panel is as tall as its wrapped lines, its bottom border on screen."""
    reason = "no agent with gpu.product = NVIDIA-A100-80GB-PCIe (1 job)"
    waiting = replace(loaded_snapshot().pool_summary, waiting=(reason,))
    handle = FakeHandle(loaded_snapshot())
    app = make_app(make_services(handle=handle))
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await ready(pilot)
        panel = screen.pool_panel

        def fits() -> bool:
            width = panel.content_region.width
            lines = panel.render().wrap(pilot.app.console, width) if width else []
            return bool(lines) and panel.content_region.height >= len(lines)

        await wait_for(pilot, fits, what="the pool panel as tall as its lines")
        handle.push(loaded_snapshot(pool_summary=waiting))  # same width, more lines
        await wait_for(pilot, lambda: "waiting:" in panel.render().plain, what="the reason")
        await wait_for(pilot, fits, what="the pool panel grown by the wrapped reason")
        assert "docker" in screen_text(pilot.app)
