"""Which image each lane runs: from the start and the listing to the snapshot, the wire and the history."""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.core.docker.agentspec import LABEL_LANE, LABEL_SLOT, placed
from gpuci_tui.core.engine.lifecycle import EngineState, Lane
from gpuci_tui.core.engine.snapshots import SnapshotMeta, supervisor_snapshot
from gpuci_tui.core.engine.steps import Died, JobEnded, Listed, Started
from gpuci_tui.core.engine.transitions.apply import apply
from gpuci_tui.core.models import HealthSnapshot, ImageUsed, SupervisorSnapshot
from gpuci_tui.core.protocols import ContainerInfo
from gpuci_tui.core.wire import snapshot_from_dict, to_dict
from tests.core.lifecycle_helpers import RULES, UNKNOWN, engine, observe, slot0

CID = "c" * 64
V1 = ImageUsed("reg:5000/agent:cuda12", "sha256:" + "1" * 64, "reg:5000/agent@sha256:" + "a" * 64)
V2_ID = "sha256:" + "2" * 64
META = SnapshotMeta("https://dev.azure.com/o", "gpu", "i", "daemon", 1, 0.0)


def snapshot_of(state: EngineState, image: str = "reg:5000/agent:cuda12") -> SupervisorSnapshot:
    return supervisor_snapshot(
        state,
        META,
        10.0,
        azure=HealthSnapshot(),
        azure_requests=0,
        gpus_of=lambda _n: ("0",),
        image=image,
    )


def test_a_started_lane_shows_its_image_in_the_snapshot_and_on_the_wire() -> None:
    state = observe(engine(UNKNOWN, UNKNOWN, standby=False), Started(0, Lane.A, CID, 5.0, V1))
    snap = snapshot_of(state)
    slot = snap.slots[0]
    assert (slot.image, slot.image_id, slot.repo_digest) == (
        "reg:5000/agent:cuda12",
        V1.image_id,
        V1.repo_digest,
    )
    lane = next(a for a in slot.agents if a.lane == "a")
    assert (lane.image, lane.image_id, lane.repo_digest) == (
        V1.reference,
        V1.image_id,
        V1.repo_digest,
    )
    data = to_dict(snap)
    assert data["slots"][0]["image_id"] == V1.image_id
    assert snapshot_from_dict(data) == snap
    # A daemon of an older release sends no image fields: they read as "not known".
    for key in ("image", "image_id", "repo_digest"):
        del data["slots"][0][key]
    assert snapshot_from_dict(data).slots[0].image_id == ""


def test_a_listing_says_what_really_runs_and_an_adopted_lane_gets_it() -> None:
    state = observe(engine(UNKNOWN, UNKNOWN, standby=False), Started(0, Lane.A, CID, 5.0, V1))
    labels = {LABEL_SLOT: "0", LABEL_LANE: "a"}
    moved = ContainerInfo(CID, "h-0", labels, "running", V1.reference, 5.0, image_id=V2_ID)
    state = observe(state, Listed(placed((moved,)), 20.0))
    assert slot0(state).lane(Lane.A).image == ImageUsed(V1.reference, V2_ID, "")
    # The same image listed without its digest (its read failed) keeps the digest known.
    same = replace(moved, image_id=V1.image_id)
    state = observe(state, Listed(placed((replace(same, repo_digest=V1.repo_digest),)), 21.0))
    assert slot0(state).lane(Lane.A).image == V1
    state = observe(state, Listed(placed((same,)), 22.0))
    assert slot0(state).lane(Lane.A).image == V1
    adopted = observe(engine(UNKNOWN, UNKNOWN, standby=False), Listed(placed((moved,)), 20.0))
    assert slot0(adopted).lane(Lane.A).image.image_id == V2_ID


def test_the_finished_job_carries_its_image_and_the_lane_forgets_it() -> None:
    state = observe(engine(UNKNOWN, UNKNOWN, standby=False), Started(0, Lane.A, CID, 5.0, V1))
    state = state.with_slot(
        slot0(state).with_lane(replace(slot0(state).lane(Lane.A), took_job=True))
    )
    step = apply(state, Died(0, Lane.A, CID, 0, 50.0), RULES)
    ended = [o for o in step.outputs if isinstance(o, JobEnded)]
    assert [e.image for e in ended] == [V1]
    assert slot0(step.state).lane(Lane.A).image == ImageUsed()
