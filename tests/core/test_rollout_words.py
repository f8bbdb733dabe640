"""The roll-out in words: one rule for ``status`` (text and JSON), the console and Prometheus."""

from __future__ import annotations

import json

import pytest

from gpuci_tui.cli.render import render_status
from gpuci_tui.core.models import RolloutSnapshot, SupervisorSnapshot
from gpuci_tui.core.wire import snapshot_from_dict, to_dict
from gpuci_tui.core.wording import rollout_words

V1, V2 = "registry.example/agent:v1", "registry.example/agent:v2"


@pytest.mark.parametrize(
    ("rollout", "words"),
    [
        (
            RolloutSnapshot("", V1, V2, "rolling", 8, 3, busy_old=1),
            f"image {V2} on 3/8 slots, 1 busy on v1",
        ),
        (
            RolloutSnapshot("cuda12", V1, V2, "canary", 8, 1, canary_slots=(0,), successes=2,
                            needed=3),
            f"cuda12: image {V2} on 1/8 slots (canary on slot 0: 2/3 jobs)",
        ),
        (
            RolloutSnapshot("", V1, V2, "rolled_back", 8, 0, reason="canary slot 0 parked"),
            f"image {V2} rolled back to {V1}: canary slot 0 parked",
        ),
        (RolloutSnapshot("", V1, V1, "done", 2, 2), "new agent spec on 2/2 slots (done)"),
        (
            RolloutSnapshot("", "repo/a@sha256:" + "0" * 64, V2, "rolling", 2, 1, busy_old=1),
            f"image {V2} on 1/2 slots, 1 busy on sha256:000000000000",
        ),
    ],
)  # fmt: skip
def test_rollout_words(rollout: RolloutSnapshot, words: str) -> None:
    assert rollout_words(rollout) == words


def test_short_words_name_images_by_tag() -> None:
    rollout = RolloutSnapshot("", V1, V2, "rolling", 8, 3, busy_old=1)
    assert rollout_words(rollout, short=True) == "…:v2 on 3/8 slots, 1 busy on v1"
    back = RolloutSnapshot("g", V1, V2, "rolled_back", 8, 0, reason="canary slot 0 parked")
    assert rollout_words(back, short=True) == "g: …:v2 rolled back to …:v1: canary slot 0 parked"


def test_status_text_and_json_carry_the_rollout() -> None:
    rollout = RolloutSnapshot("", V1, V2, "rolling", 8, 3, busy_old=1, started_at=90.0)
    snap = SupervisorSnapshot(
        taken_at=100.0, org_url="https://dev.azure.com/o", pool="gpu", instance="i",
        desired_count=8, rollouts=(rollout,),
    )  # fmt: skip
    assert f"rollout: image {V2} on 3/8 slots, 1 busy on v1" in render_status(snap, now=100.0)
    data = json.loads(json.dumps(to_dict(snap)))
    assert data["rollouts"][0]["state"] == "rolling"
    assert snapshot_from_dict(data).rollouts == (rollout,)
