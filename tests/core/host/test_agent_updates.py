"""AgentUpdates: the organisation's agent version, the images', the cache and the mount."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuci_tui.core.engine.agent_versions import AGENT_VERSION_LABEL
from gpuci_tui.core.host.images.agent_cache import AgentPackageCache
from gpuci_tui.core.host.images.agent_updates import AgentUpdates, agent_platform
from gpuci_tui.core.models import SupervisorEvent
from gpuci_tui.core.protocols import ImageConfig
from gpuci_tui.sim.api import SimPoolApi
from gpuci_tui.sim.org import SimOrg
from gpuci_tui.sim.server import SimServer

PAT = "p" * 52
IMAGE = "gpuci-agent:cuda12.8"


@pytest.fixture
def org() -> SimOrg:
    org = SimOrg()
    org.add_pat(PAT)
    org.add_pool("gpu")
    return org


@pytest.fixture
def api(org: SimOrg) -> Iterator[SimPoolApi]:
    with SimServer(org) as server:
        api = SimPoolApi(org, PAT)
        api.download_base = server.url  # the tarballs come from the sim server, on loopback
        yield api


def updates(api: SimPoolApi, root: Path, baked: str | None = "4.264.2") -> AgentUpdates:
    events: list[tuple[str, str]] = []

    def inspect(image: str) -> ImageConfig:
        return ImageConfig("sha256:x", {}, {AGENT_VERSION_LABEL: baked} if baked else {})

    u = AgentUpdates(
        api,
        AgentPackageCache(root),
        lambda: {"": IMAGE},
        inspect,
        lambda kind, message: events.append((kind, message)),
        platform="linux-x64",
    )
    u.events = events  # type: ignore[attr-defined]
    return u


def kinds(u: AgentUpdates) -> list[str]:
    return [k for k, _ in u.events]  # type: ignore[attr-defined]


def test_platform_of_the_host() -> None:
    assert agent_platform("x86_64") == "linux-x64" and agent_platform("aarch64") == "linux-arm64"


def test_matching_versions_fetch_nothing_mount_nothing_and_warn_nothing(
    api: SimPoolApi, tmp_path: Path
) -> None:
    u = updates(api, tmp_path)
    assert asyncio.run(u.check()) == 3600.0
    assert u.reading.org_version == "4.264.2" and u.reading.warnings == ()
    assert [(i.image, i.baked) for i in u.reading.images] == [(IMAGE, "4.264.2")]
    assert u.mount_for(IMAGE) is None and u.cache.downloads == 0 and kinds(u) == []


def test_a_newer_required_agent_is_fetched_once_verified_and_mounted(
    api: SimPoolApi, org: SimOrg, tmp_path: Path
) -> None:
    u = updates(api, tmp_path)
    org.require_agent_version("4.270.0")
    asyncio.run(u.check())
    asyncio.run(u.check())
    assert u.cache.downloads == 1 and org.packages.downloads == {
        "vsts-agent-linux-x64-4.270.0.tar.gz": 1
    }
    mount = u.mount_for(IMAGE)
    assert mount is not None and mount.version == "4.270.0"
    assert Path(mount.host, ".image-agent-version").read_text() == "4.270.0\n"
    assert u.reading.cached == "4.270.0" and u.reading.org_version == "4.270.0"
    assert kinds(u) == ["agent_package", "agent_version"]
    [warning] = u.reading.warnings
    assert "group 's image has agent 4.264.2; the organisation offers 4.270.0" in warning
    assert "meanwhile new agent containers use the cached package 4.270.0" in warning
    # An image that already has the newer agent gets no mount.
    u._baked[IMAGE] = "4.270.0"
    assert u.mount_for(IMAGE) is None


def test_a_wrong_hash_is_refused_once_with_a_clear_event_and_nothing_mounted(
    api: SimPoolApi, org: SimOrg, tmp_path: Path
) -> None:
    u = updates(api, tmp_path)
    org.require_agent_version("4.270.0")
    org.packages.corrupt_hash()
    asyncio.run(u.check())
    asyncio.run(u.check())  # the same listed hash is not fetched again
    refused = [m for k, m in u.events if k == "agent_package_refused"]  # type: ignore[attr-defined]
    assert len(refused) == 1 and u.cache.downloads == 1
    assert refused[0].startswith("agent package 4.270.0 refused: its SHA-256 is ")
    assert "update themselves (slower), or rebuild the image" in refused[0]
    assert u.mount_for(IMAGE) is None and u.reading.cached is None
    assert "refused" in u.reading.message
    # The organisation fixes its list: the new hash is tried, verified and mounted.
    org.packages.corrupt_hash(False)
    asyncio.run(u.check())
    assert u.mount_for(IMAGE) is not None and u.cache.downloads == 2


def test_queued_jobs_demanding_a_newer_agent_are_warned_about(
    api: SimPoolApi, tmp_path: Path
) -> None:
    u = updates(api, tmp_path)
    u.demanded = lambda: "4.266.0"
    asyncio.run(u.check())
    assert u.reading.demanded == "4.266.0"
    assert u.reading.warnings == (
        "queued jobs demand agent 4.266.0 but group 's image has 4.264.2: each of its agents "
        "leaves to update before it can take one",
    )


def test_an_update_exit_makes_the_next_start_wait_for_the_package(
    api: SimPoolApi, org: SimOrg, tmp_path: Path
) -> None:
    u = updates(api, tmp_path)

    async def scenario() -> object:
        runner = asyncio.create_task(u.run())
        await asyncio.sleep(0)  # one turn of the loop: the runner starts (no time passes)
        await u.mount_for_start(IMAGE)  # nothing asked: no wait, nothing to mount
        org.require_agent_version("4.270.0")
        u.left_to_update(SupervisorEvent(0.0, "agent_updating", "x exited", slot=3))
        mount = await asyncio.wait_for(u.mount_for_start(IMAGE), 10)
        runner.cancel()
        return mount

    mount = asyncio.run(scenario())
    assert getattr(mount, "version", None) == "4.270.0"
    said = [m for k, m in u.events if k == "agent_package"]  # type: ignore[attr-defined]
    assert said[-1] == (
        "agent on slot 3 left to update to 4.270.0; the next container uses the cached "
        "package 4.270.0"
    )


def test_a_failed_read_never_stops_anything(tmp_path: Path) -> None:
    class NoPackages:
        def agent_packages(self, platform: str) -> list[object]:
            raise AttributeError("a test double without packages")

    u = updates(NoPackages(), tmp_path)  # type: ignore[arg-type]
    assert asyncio.run(u.check()) == 60.0
    assert u.reading.org_version is None and u.mount_for(IMAGE) is None


async def test_in_process_a_forced_update_is_served_with_the_cached_package(
    api: SimPoolApi, org: SimOrg, tmp_path: Path
) -> None:
    """The whole assembly, in process (SimulatedRuntime): no Docker, same rules."""
    from gpuci_tui.core.config.loader import load_config
    from gpuci_tui.core.host.assemble import assemble
    from gpuci_tui.core.models import SlotState
    from gpuci_tui.core.store.history import JobHistory
    from gpuci_tui.sim.runtime import DEFAULT_IMAGE, SimulatedRuntime
    from tests.core.supervisor_env import PAT as TOKEN
    from tests.core.supervisor_env import StaticTokens, wait_until

    path = tmp_path / "config.toml"
    path.write_text(
        f'[azure]\nurl = "http://127.0.0.1:9"\npool = "gpu"\n[agents]\nimage = "{DEFAULT_IMAGE}"\n'
        'name_prefix = "upd"\ncount = 1\ngpus = "none"\n[supervisor]\npoll_interval = 0.2\n'
    )
    org.heartbeat_timeout = 3.0
    org.add_pat(TOKEN)  # what StaticTokens hands the agents
    parts = assemble(
        load_config(path),
        api=api,
        runtime=SimulatedRuntime(org, destroy_delay=0.05),
        tokens=StaticTokens(),
        history=JobHistory(":memory:"),
        mode="in-process",
        agent_cache=tmp_path / "cache",
    )
    assert parts.agent_updates is not None
    parts.start()
    try:
        sup = parts.supervisor
        await wait_until(
            lambda: [s.state for s in sup.snapshot().slots] == [SlotState.IDLE], 20, "idle"
        )
        await wait_until(lambda: sup.snapshot().agent_versions.checked_at is not None, 10)
        org.require_agent_version("4.270.0")
        job = org.queue_job(org.pools("gpu")[0].id, duration=0.2)
        await wait_until(lambda: org.job(job).result is not None, 30, "the job served")
        assert org.job(job).result == "succeeded"
        ran_on = org.find_agent(str(org.job(job).agent_name))
        assert ran_on is not None and ran_on.version == "4.270.0"
        snap = sup.snapshot()
        assert snap.agent_versions.cached == "4.270.0"
        assert not any(s.state == SlotState.PARKED for s in snap.slots)
        assert org.packages.downloads == {"vsts-agent-linux-x64-4.270.0.tar.gz": 1}
        # The standby started before the package was cached is replaced while idle: the
        # next jobs are served without a second update exit (one per slot, not per lane).
        more = [org.queue_job(org.pools("gpu")[0].id, duration=0.2) for _ in range(2)]
        await wait_until(lambda: all(org.job(j).result for j in more), 30, "the next jobs")
        updating = [e for e in sup.events if e.kind == "agent_updating"]
        assert len(updating) <= 1, [e.message for e in updating]
    finally:
        await parts.close()
