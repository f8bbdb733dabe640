"""Shaped slots through a real engine's NVIDIA device driver: the MIG UUID and both GPUs arrive.

A private engine started with a no-op ``nvidia-container-runtime-hook`` on its
PATH registers Moby's NVIDIA device driver without a GPU (../shared/test-infra.md
§7): the driver sets ``NVIDIA_VISIBLE_DEVICES`` from the DeviceRequest's ids, as
on a GPU host, so the container tells which devices it was given. Only this
private engine gets that PATH; it is stopped by its pid and its folder removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import docker
import pytest

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config
from gpuci_tui.core.config.slot_shapes import HostTopology, MigDevice, use_topology
from gpuci_tui.core.docker.agentspec import build_spec
from gpuci_tui.core.docker.runtime import DockerRuntime
from tests.fixture_images import FIXTURE_IMAGE, busybox_rootfs_tar
from tests.real.docker_runtime_helpers import secret
from tests.waiting import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.root]

MIG_UUID = "MIG-5f6ad0c3-1a3b-5c1e-9c2d-7f2e0b4a1c11"
TOPOLOGY = HostTopology(
    gpus=(0, 1, 2, 3),
    uuids={i: f"GPU-{i}aaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee" for i in range(4)},
    nvlinks=frozenset({(0, 2), (1, 3)}),
    mig_mode=frozenset({0}),
    mig=(MigDevice(0, 0, MIG_UUID, "1g.10gb", 9856),),
)


@pytest.fixture(scope="module")
def gpu_engine() -> Iterator[docker.DockerClient]:
    """A private dockerd whose PATH has the no-op NVIDIA hook, with the busybox image."""
    if shutil.which("dockerd") is None:
        pytest.fail("dockerd is required (run scripts/test.sh)", pytrace=False)
    # Short: containerd's socket path under the exec root has a length limit.
    root = Path(tempfile.mkdtemp(prefix="gpueng.", dir="/tmp"))
    (root / "bin").mkdir()
    hook = root / "bin" / "nvidia-container-runtime-hook"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    sock = root / "d.sock"
    log = (root / "dockerd.log").open("wb")
    engine = subprocess.Popen(  # noqa: S603 - our own arguments
        [
            "dockerd",
            "--host",
            f"unix://{sock}",
            "--data-root",
            str(root / "data"),
            "--exec-root",
            str(root / "x"),
            "--pidfile",
            str(root / "d.pid"),
            "--bridge=none",
            "--iptables=false",
            "--ip-masq=false",
            "--ip-forward=false",
        ],  # fmt: skip
        env={**os.environ, "PATH": f"{root / 'bin'}:{os.environ.get('PATH', '')}"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    client: docker.DockerClient | None = None

    def answering() -> docker.DockerClient | None:
        assert engine.poll() is None, f"dockerd exited: {(root / 'dockerd.log').read_text()}"
        # The client asks the engine its API version when built: only once it answers.
        with contextlib.suppress(Exception):
            return docker.DockerClient(base_url=f"unix://{sock}", timeout=30)
        return None

    try:
        client = wait_until(
            answering, 60, lambda: f"the private engine: {(root / 'dockerd.log').read_text()}"
        )
        repository, tag = FIXTURE_IMAGE.split(":")
        client.api.import_image_from_data(busybox_rootfs_tar(), repository=repository, tag=tag)
        yield client
    finally:
        if client is not None:
            client.close()
        engine.send_signal(signal.SIGTERM)
        try:
            engine.wait(timeout=30)
        except subprocess.TimeoutExpired:
            engine.kill()
            engine.wait(timeout=10)
        log.close()
        _unmount_under(root)  # dockerd leaves its network namespace mounted in the exec root
        shutil.rmtree(root, ignore_errors=True)


def _unmount_under(root: Path) -> None:
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(f"{root}/")]
    for point in sorted(points, reverse=True):
        subprocess.run(["umount", "-l", point], check=False)  # noqa: S603, S607


@pytest.fixture(autouse=True)
def topology() -> Iterator[None]:
    use_topology(lambda: TOPOLOGY)
    yield
    use_topology(None)


def config(**agents: Any) -> Config:
    base = AgentsConfig(count=1, image=FIXTURE_IMAGE, name_prefix="shapes", network="host")
    return Config(
        azure=AzureConfig(url="https://dev.azure.com/acme", pool="gpu"),
        agents=replace(base, **agents),
    )


def visible_devices(client: docker.DockerClient, cfg: Config, slot: int) -> str:
    """Start ``slot``'s container as the supervisor does; what it sees in NVIDIA_VISIBLE_DEVICES."""
    runtime = DockerRuntime(client=client)
    spec = build_spec(cfg, slot, command=("sh", "-c", 'echo "$NVIDIA_VISIBLE_DEVICES"'))
    info = runtime.start(spec, secret())
    container = client.containers.get(info.id)
    assert container.wait(timeout=60)["StatusCode"] == 0
    out = container.logs().decode().strip()
    container.remove(force=True)
    return out


def test_a_mig_slot_container_gets_the_mig_uuid(gpu_engine: docker.DockerClient) -> None:
    assert visible_devices(gpu_engine, config(gpus="mig"), 0) == MIG_UUID


def test_a_two_gpu_slot_container_gets_both_nvlink_gpus(gpu_engine: docker.DockerClient) -> None:
    pairs = config(gpus="per-agent", gpus_per_slot=2, count=2)
    uuids = TOPOLOGY.uuids
    assert visible_devices(gpu_engine, pairs, 0) == f"{uuids[0]},{uuids[2]}"
    assert visible_devices(gpu_engine, pairs, 1) == f"{uuids[1]},{uuids[3]}"
