"""Configuration of slot shapes: ``gpus_per_slot`` and ``gpus = "mig"``."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuci_tui.core.config.loader import load_config, save_config
from tests.core.config_helpers import base_doc, problems, write


def test_gpus_per_slot_and_mig_load_and_save_round_trip(tmp_path: Path) -> None:
    doc = base_doc()
    doc["agents"].update(gpus="per-agent", gpus_per_slot=2)
    config = load_config(write(tmp_path / "a.toml", doc), gpu_count=4)
    assert (config.agents.gpus, config.agents.gpus_per_slot) == ("per-agent", 2)
    save_config(config, tmp_path / "b.toml")
    assert "gpus_per_slot = 2" in (tmp_path / "b.toml").read_text()
    assert load_config(tmp_path / "b.toml").agents == config.agents

    doc = base_doc()
    doc["agents"]["gpus"] = "mig"
    assert load_config(write(tmp_path / "c.toml", doc)).agents.gpus == "mig"


@pytest.mark.parametrize(
    ("agents", "gpu_count", "want"),
    [
        (
            {"count": 3, "gpus": "per-agent", "gpus_per_slot": 2},
            4,
            "agents.count: is 3 with gpus_per_slot = 2 (6 GPUs), but this host has 4 GPUs; "
            "lower count to 2 or gpus_per_slot",
        ),
        (
            {"count": 1, "gpus": "per-agent", "gpus_per_slot": 4},
            2,
            "agents.count: is 1 with gpus_per_slot = 4 (4 GPUs), but this host has 2 GPUs; "
            "lower gpus_per_slot",
        ),
        (
            {"count": 2, "gpus": {"per_agent": ["0", "1", "2"]}, "gpus_per_slot": 2},
            None,
            "agents.count: is 2, but gpus per_agent lists 3 GPUs (2 per slot)",
        ),
        (
            {"gpus": "all", "gpus_per_slot": 2},
            None,
            'agents.gpus_per_slot: is 2, but gpus = "all": gpus_per_slot applies to '
            'gpus = "per-agent" or { per_agent = [...] } only',
        ),
        (
            {"gpus": "per-agent", "gpus_per_slot": 9},
            None,
            "agents.gpus_per_slot: must be a whole number from 1 to 8, got 9",
        ),
    ],
)
def test_shapes_that_do_not_fit_say_why(
    tmp_path: Path, agents: dict[str, object], gpu_count: int | None, want: str
) -> None:
    doc = base_doc()
    doc["agents"].update(agents)
    assert problems(tmp_path, doc, gpu_count=gpu_count) == [want]


def test_groups_per_slot_needs_a_gpu_list_beside_other_groups_and_one_mig_group(
    tmp_path: Path,
) -> None:
    doc = base_doc()
    doc["groups"] = {
        "pairs": {"count": 1, "gpus": "per-agent", "gpus_per_slot": 2},
        "one": {"count": 1, "gpus": ["3"]},
        "small": {"count": 2, "gpus": "mig"},
        "tiny": {"count": 2, "gpus": "mig"},
    }
    assert problems(tmp_path, doc) == [
        "groups.pairs.gpus_per_slot: is 2 without a GPU list, but other groups have GPUs: "
        'name this group\'s GPUs with gpus = { per_agent = ["0", "1", ...] }',
        'groups.tiny.gpus: is "mig", and so is group small: the MIG devices go to one group',
    ]
    doc["groups"]["pairs"]["gpus"] = {"per_agent": ["0", "1"]}
    del doc["groups"]["tiny"]
    config = load_config(write(tmp_path / "ok.toml", doc))
    assert [g.agents.gpus_per_slot for g in config.groups] == [2, 1, 1]
