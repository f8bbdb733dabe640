"""The setup wizard, steps 4–7: image, agents, volumes, review and save."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Button, Input, OptionList, RadioButton

from gpuci_tui.core.config.loader import VolumeConfig, load_config
from gpuci_tui.core.config.validate import IMAGE_EXAMPLE
from gpuci_tui.core.gpu_readings import GpuFrame, GpuHostInfo
from gpuci_tui.screens.dashboard import DashboardScreen
from tests.ui.fakes import (
    GOOD_PAT,
    FakeSampler,
)
from tests.ui.helpers import choose, text_of, wait_for
from tests.ui.scenarios import NO_GPU, NOW
from tests.ui.wizard_harness import IMAGE, URL, wizard

# --------------------------------------------------------------------------- step 4: image


async def test_image_is_suggested_for_the_driver_and_checked(tmp_path: Path) -> None:
    async with wizard(tmp_path) as w:
        await w.through(3)
        await wait_for(w.pilot, lambda: w.field("#image").value == IMAGE)
        await wait_for(
            w.pilot,
            lambda: text_of(w.wizard, "#image-present") == "✓ present locally",
        )
        assert text_of(w.wizard, "#image-compat").startswith("✓ ")
        await w.fill("#image", "Not An Image")
        await w.next()
        assert w.message.startswith(
            f'The image is not an image reference like "{IMAGE_EXAMPLE}"'
        ), "a real-looking example, never the value refused"
        assert "Not An Image" in w.message
        await w.fill("#image", "gpuci-agent:amd64-ubuntu24.04-cuda12.8")
        await w.next()
        await w.at(4)
        assert w.wizard.draft.image_warnings == [
            "gpuci-agent:amd64-ubuntu24.04-cuda12.8 is not present locally: build it (dockeragent/build.sh), "
            "or the daemon pulls it before the first start (gpuci-tui image pull to pull it now)."
        ]


async def test_too_old_driver_is_flagged(tmp_path: Path) -> None:
    old = GpuHostInfo(
        available=True, driver_version="550.54.15", cuda_driver_version=(12, 4), gpu_count=1
    )
    sampler = FakeSampler(host=old)
    async with wizard(tmp_path, sampler=sampler) as w:
        await w.through(3)
        await wait_for(w.pilot, lambda: w.field("#image").value != "")
        await w.fill("#image", IMAGE)
        await w.pilot.pause(0.05)
        compat = text_of(w.wizard, "#image-compat")
        assert compat.startswith("! ") and "580" in compat, compat


# --------------------------------------------------------------------------- step 5: agents


@pytest.mark.parametrize(
    ("count", "prefix", "policy", "expected"),
    [
        ("0", "gpuhost", None, "The number of agents must be a whole number from 1 to 64"),
        ("", "gpuhost", None, "The number of agents"),
        ("2", "bad name!", None, "The name prefix must start with a letter or digit"),
        (
            "5",
            "gpuhost",
            "#gpus-per-agent",
            'The number of agents is 5 with gpus = "per-agent", but this host has 4 GPUs',
        ),
    ],
)
async def test_agent_settings_are_checked(
    tmp_path: Path, count: str, prefix: str, policy: str | None, expected: str
) -> None:
    async with wizard(tmp_path) as w:
        await w.through(4)
        await wait_for(
            w.pilot, lambda: w.field("#prefix").value == "gpuhost", what="the host-name default"
        )
        if policy:
            await choose(w.pilot, policy)
        await w.fill("#count", count)
        await w.fill("#prefix", prefix)
        await w.next()
        assert w.wizard.index == 4
        assert w.message.startswith(expected), w.message


async def test_every_agent_field_is_reachable_at_80x24(tmp_path: Path) -> None:
    async with wizard(tmp_path, size=(80, 24)) as w:
        await w.through(4)
        step = w.wizard.step
        nav_top = w.wizard.query_one("#wizard-nav").region.y
        seen = set()
        for _ in range(8):
            await w.pilot.press("tab")
            focused = w.app.focused
            assert focused is not None
            if focused.id:
                seen.add(focused.id)
            if step in focused.ancestors:
                region = focused.region
                assert region.height > 0 and region.y >= step.region.y, focused
                assert region.bottom <= nav_top, f"{focused} is hidden under the buttons"
        assert {"count", "prefix", "gpu-policy", "network"} <= seen


async def test_gpu_agents_need_a_visible_gpu(tmp_path: Path) -> None:
    sampler = FakeSampler([GpuFrame(taken_at=NOW, host=NO_GPU)])
    async with wizard(tmp_path, sampler=sampler) as w:
        await w.through(4)
        await wait_for(w.pilot, lambda: w.field("#count").value == "1")
        assert "No GPU visible: NVML library not found" in text_of(w.wizard, "#gpu-list")
        await w.next()
        assert w.message.startswith("No GPU is visible on this host (NVML library not found")
        await choose(w.pilot, "#gpus-none")
        await w.next()
        await w.at(5)
        assert w.wizard.draft.gpu_policy == "none"


# --------------------------------------------------------------------------- step 6: volumes


async def test_volumes_are_checked_added_and_removed(tmp_path: Path) -> None:
    data = tmp_path / "imagenet"
    data.mkdir()
    async with wizard(tmp_path) as w:
        await w.through(5)
        await w.fill("#vol-host", "/nope/missing")
        await w.fill("#vol-container", "/datasets/x")
        await w.fill("#vol-env", "PATH")
        await w.pilot.press("enter")
        lines = w.message.split("\n")
        assert lines[0].startswith("The host directory: /nope/missing does not exist on this host")
        assert lines[1].startswith('The variable: "PATH" is reserved')
        await w.fill("#vol-host", str(data))
        await w.fill("#vol-env", "DATASET_DIR")
        await w.pilot.press("enter")
        assert w.message == f"Added {data} → /datasets/x."
        assert w.wizard.draft.volumes == [VolumeConfig(str(data), "/datasets/x", "DATASET_DIR")]
        await w.fill("#vol-host", str(data))
        await w.fill("#vol-container", "/datasets/x")
        await w.next()
        assert w.message.startswith(
            "The container path: /datasets/x is already used by another volume"
        )
        for name in ("host", "container", "env"):
            w.field(f"#vol-{name}").value = ""
        listing = w.wizard.query_one("#vol-list", OptionList)
        listing.focus()
        listing.highlighted = 0
        await w.pilot.click("#vol-remove")
        assert w.wizard.draft.volumes == []


# --------------------------------------------------------------------------- step 7: review and save


async def test_review_save_writes_the_config_and_opens_the_dashboard(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    async with wizard(tmp_path) as w:
        await w.through(5)
        await w.fill("#vol-host", str(data))
        await w.fill("#vol-container", "/datasets/data")
        await w.next()
        await w.at(6)
        review = text_of(w.wizard, "#review").split("\n")
        assert review == [
            f"Organisation  {URL}",
            "PAT           valid for Jane Doe; stored in the OS keyring",
            "Pool          gpu-a100",
            f"Image         {IMAGE}",
            "Agents        4 (gpuhost-0 … gpuhost-3), GPUs: all, network: bridge",
            f"Volumes       {data} → /datasets/data",
        ]
        assert not w.config_path.exists(), "nothing is written before Save"
        await w.pilot.press("enter")  # the Save button has the focus
        await wait_for(
            w.pilot, lambda: isinstance(w.app.screen, DashboardScreen), what="the dashboard"
        )
        saved = load_config(w.config_path)
        assert saved.azure.url == URL and saved.azure.pool == "gpu-a100"
        assert saved.agents.count == 4 and saved.agents.image == IMAGE
        assert saved.agents.volumes == (VolumeConfig(str(data), "/datasets/data", None),)
        assert GOOD_PAT not in w.config_path.read_text()
        assert stat.S_IMODE(w.config_path.stat().st_mode) == 0o600
        await wait_for(w.pilot, lambda: len(w.started) == 1, what="the supervisor start")
        assert w.started[0].azure.pool == "gpu-a100"
        screen = w.app.screen
        assert isinstance(screen, DashboardScreen)
        await wait_for(
            w.pilot, lambda: screen.snapshot is not None, what="the new supervisor's snapshot"
        )


async def test_a_config_that_cannot_be_written_is_explained(tmp_path: Path) -> None:
    blocker = tmp_path / "cfg"
    blocker.write_text("not a directory")
    async with wizard(tmp_path) as w:
        await w.through(6)
        await w.next()
        assert w.wizard.index == 6
        assert w.message.startswith("The configuration was not saved: "), w.message
        assert w.started == []


async def _second_group(w: Any, gpu_ids: str) -> None:
    """From step 5 of a fresh wizard: 2 agents one GPU each, then a second group on ``gpu_ids``."""
    await w.at(4)
    await wait_for(w.pilot, lambda: w.field("#count").value != "", what="the defaults")
    await w.fill("#count", "2")
    w.wizard.query_one("#gpus-per-agent", RadioButton).value = True
    assert not w.wizard.query_one("#group-name", Input).display  # one group: no group fields
    await w.next()
    await w.next()
    await w.at(6)
    w.wizard.query_one("#add-group", Button).press()
    await w.at(2)
    await w.fill("#pool-name", "Default")
    await w.next()
    await wait_for(w.pilot, lambda: w.field("#image").value != "", what="the image")
    await w.next()
    await w.at(4)
    assert w.field("#group-name").display and w.field("#group-name").value == "group2"
    assert w.field("#prefix").value == "gpuhost-g2"
    await w.fill("#gpu-ids", gpu_ids)
    await w.next()
    await w.next()
    await w.at(6)


async def test_the_wizard_adds_a_second_agent_group(tmp_path: Path) -> None:
    async with wizard(tmp_path) as w:
        await w.through(4)
        await _second_group(w, "2,3")
        review = text_of(w.wizard, "#review").split("\n")
        assert review[2:5] == [
            f"Group         default: pool gpu-a100, 2 × {IMAGE}, gpuhost-N, GPUs: per-agent",
            "Group         group2",
            "Pool          Default",
        ]
        assert "GPUs: per-agent over 2,3" in review[6]
        await w.pilot.press("enter")
        await wait_for(
            w.pilot, lambda: isinstance(w.app.screen, DashboardScreen), what="the dashboard"
        )
        saved = load_config(w.config_path)
        first, second = saved.groups
        assert (first.name, first.pool, first.agents.count) == ("default", "gpu-a100", 2)
        assert (second.name, second.pool, second.agents.name_prefix) == (
            "group2", "Default", "gpuhost-g2",
        )  # fmt: skip
        assert (second.agents.gpus, second.agents.gpu_ids) == ("per-agent", ("2", "3"))


async def test_two_groups_on_one_gpu_are_refused_at_save(tmp_path: Path) -> None:
    async with wizard(tmp_path) as w:
        await w.through(4)
        await _second_group(w, "1,2")
        await w.next()
        assert w.wizard.index == 6 and not w.config_path.exists()
        assert "GPU" in w.message and "1" in w.message, w.message
