"""From configuration to one slot's container: names, labels, env contract, GPUs, mounts."""

from __future__ import annotations

from dataclasses import replace

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config, VolumeConfig
from gpuci_tui.core.docker.agentspec import (
    LABEL_AGENT_PACKAGE,
    LABEL_CONFIG,
    LABEL_INSTANCE,
    LABEL_LANE,
    LABEL_SLOT,
    build_spec,
    config_hash,
    instance_id,
    placed,
    slot_of,
)
from gpuci_tui.core.engine.lifecycle import Lane
from gpuci_tui.core.engine.steps import ListedContainer
from gpuci_tui.core.packages import AgentPackageMount
from gpuci_tui.core.protocols import ContainerInfo, VolumeMount


def make(**agents: object) -> Config:
    base = AgentsConfig(count=2, image="acme/agent:1", name_prefix="gpuhost")
    return Config(
        azure=AzureConfig(url="https://dev.azure.com/acme", pool="gpu"),
        agents=replace(base, **agents),  # type: ignore[arg-type]
    )


def test_name_labels_and_env_contract() -> None:
    config = make()
    spec = build_spec(config, 1, extra_labels={"gpuci.test": "x"})
    assert spec.name == "gpuhost-1"
    assert spec.labels[LABEL_SLOT] == "1"
    assert spec.labels[LABEL_INSTANCE] == instance_id(config)
    assert spec.labels[LABEL_CONFIG] == config_hash(config)
    assert spec.labels["gpuci.test"] == "x"
    assert slot_of(spec.labels) == 1
    env = dict(spec.environment)
    assert env["AZP_URL"] == "https://dev.azure.com/acme"
    assert env["AZP_POOL"] == "gpu"
    assert env["AZP_AGENT_NAME"] == "gpuhost-1"
    assert env["AZP_TOKEN_FILE"] == spec.token_path == "/run/azp/token"
    assert not any("TOKEN" in k and k != "AZP_TOKEN_FILE" for k in env)
    # Removed by the engine after its log tail is read, not by Docker (which drops the logs).
    assert not spec.auto_remove
    assert spec.oom_score_adj == 1000


def test_gpu_policies() -> None:
    assert build_spec(make(gpus="all"), 0).gpus == "all"
    assert build_spec(make(gpus="none"), 0).gpus == "none"
    assert build_spec(make(gpus="per-agent"), 1).gpus == ("1",)


def test_volumes_are_read_only_with_their_env() -> None:
    vol = VolumeConfig(host="/data/imagenet", container="/datasets/imagenet", env="IMAGENET_DIR")
    spec = build_spec(make(volumes=(vol,)), 0)
    assert spec.volumes[0].host == "/data/imagenet"
    assert spec.environment["IMAGENET_DIR"] == "/datasets/imagenet"


def test_docker_socket_mounts_socket_and_same_path_agent_dir() -> None:
    spec = build_spec(make(docker_socket=True), 0, agent_dir_root="/var/lib/gpuci/agents/")
    assert ("/var/run/docker.sock", "/var/run/docker.sock", "rw") in spec.extra_mounts
    assert ("/var/lib/gpuci/agents/gpuhost-0",) * 2 + ("rw",) in spec.extra_mounts
    assert spec.environment["AZP_AGENT_DIR"] == "/var/lib/gpuci/agents/gpuhost-0"
    plain = build_spec(make(), 0, agent_dir_root="/var/lib/gpuci/agents")
    assert plain.extra_mounts == ()
    assert "AZP_AGENT_DIR" not in plain.environment


def test_config_hash_changes_with_the_image_only_when_relevant() -> None:
    assert config_hash(make()) != config_hash(make(image="acme/agent:2"))
    assert config_hash(make()) == config_hash(make(count=5))
    assert instance_id(make()) == instance_id(make(image="acme/agent:2"))


def test_placed_reads_slot_and_lane_from_the_labels_and_drops_the_rest() -> None:
    def info(cid: str, **labels: str) -> ContainerInfo:
        return ContainerInfo(id=cid, name=cid, labels=labels, status="running")

    old = info("old", **{LABEL_SLOT: "0"})  # from before hot standby: lane a
    b = info("b", **{LABEL_SLOT: "1", LABEL_LANE: "b"})
    odd = info("odd", **{LABEL_SLOT: "2", LABEL_LANE: "z"})  # unknown lane: a
    nothing = info("nothing")
    bad = info("bad", **{LABEL_SLOT: "x"})
    assert placed((old, b, odd, nothing, bad)) == (
        ListedContainer(0, Lane.A, old),
        ListedContainer(1, Lane.B, b),
        ListedContainer(2, Lane.A, odd),
    )


def test_a_cached_agent_package_is_mounted_read_only_where_start_sh_looks() -> None:
    package = AgentPackageMount("/var/lib/gpuci/agent-cache/4.270.0", "4.270.0")
    spec = build_spec(
        make(volumes=(VolumeConfig("/data", "/data", "DATA"),)), 0, agent_package=package
    )
    assert spec.volumes[-1] == VolumeMount(
        package.host, "/azp/agent-package", "AZP_AGENT_PACKAGE_DIR"
    )
    assert spec.environment["AZP_AGENT_PACKAGE_DIR"] == "/azp/agent-package"
    assert spec.environment["AZP_AGENT_PACKAGE_VERSION"] == "4.270.0"
    assert spec.labels[LABEL_AGENT_PACKAGE] == "4.270.0"
    assert "AZP_AGENT_PACKAGE_DIR" not in build_spec(make(), 0).environment
