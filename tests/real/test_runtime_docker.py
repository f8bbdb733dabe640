"""DockerRuntime against the real Docker engine (busybox image imported locally, host network).

Every container carries the label ``gpuci.test=<run_label>`` so the fixture removes
it afterwards. The engine is shared: nothing here restarts it; a broken event
stream is produced with a Unix-socket relay in front of it instead.
"""

from __future__ import annotations

import contextlib
import glob
import io
import json
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from gpuci_tui.core.docker.errors import NO_GPU_RUNTIME
from gpuci_tui.core.docker.runtime import DockerRuntime
from gpuci_tui.core.errors import ContainerNameConflictError, ContainerStartError
from gpuci_tui.core.protocols import VolumeMount
from tests.real.docker_runtime_helpers import (
    EventCollector,
    make_spec,
    ours,
    secret,
    wait_until,
)

pytestmark = pytest.mark.docker


# --------------------------------------------------------------------------- start


def test_start_with_full_spec(
    runtime: DockerRuntime, docker_client: Any, busybox_image: str, run_label: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "model.bin").write_text("weights")
    extra = tmp_path / "extra"
    extra.mkdir()
    token = secret()
    spec = make_spec(
        run_label,
        "full",
        busybox_image,
        volumes=(VolumeMount(str(data), "/data", "DATA_DIR"),),
        extra_mounts=((str(extra), "/extra", "ro"),),
        mem_limit="64m",
    )
    before = runtime.api_call_count
    info = runtime.start(spec, token)
    # image check, create, put_archive, start: what one agent start costs.
    assert runtime.api_call_count - before == 4
    assert (info.name, info.status, info.image) == (spec.name, "running", busybox_image)

    inspect = docker_client.api.inspect_container(info.id)
    host = inspect["HostConfig"]
    assert inspect["Name"] == f"/{spec.name}"
    assert inspect["Config"]["Labels"] == {"gpuci.test": run_label, "gpuci.case": "full"}
    assert host["AutoRemove"] is False  # the engine removes dead agents, after their tails
    assert host["OomScoreAdj"] == 1000
    assert host["NetworkMode"] == "host"
    assert host["Memory"] == host["MemorySwap"] == 64 * 1024 * 1024
    assert not host.get("Init")
    assert not host.get("DeviceRequests")
    mounts = {m["Destination"]: m for m in inspect["Mounts"]}
    assert mounts["/data"]["Source"] == str(data)
    assert mounts["/data"]["RW"] is False
    assert mounts["/extra"]["RW"] is False
    assert "AZP_TOKEN_FILE=/run/azp/token" in inspect["Config"]["Env"]
    assert token not in json.dumps(inspect)

    container = docker_client.containers.get(info.id)
    code, out = container.exec_run(["cat", "/run/azp/token"])
    assert (code, out.decode()) == (0, token)
    code, out = container.exec_run(
        ["/bin/busybox", "stat", "-c", "%a %u %g", "/run/azp", "/run/azp/token"]
    )
    assert (code, out.decode().split("\n")[:2]) == (0, ["700 0 0", "600 0 0"])
    code, out = container.exec_run(["cat", "/data/model.bin"])
    assert (code, out.decode()) == (0, "weights")
    code, _ = container.exec_run(["sh", "-c", "echo x > /data/new"])
    assert code != 0, "the volume must be read-only"

    leaks = []
    for path in glob.glob("/proc/[0-9]*/cmdline") + glob.glob("/proc/[0-9]*/environ"):
        with contextlib.suppress(OSError):
            if token.encode() in Path(path).read_bytes():
                leaks.append(path)
    assert leaks == [], f"the PAT is visible in {leaks}"


def test_missing_image_is_not_pulled(
    runtime: DockerRuntime, docker_client: Any, run_label: str
) -> None:
    image = f"gpuci-fixture/absent-{run_label}:1"
    before = runtime.api_call_count
    with pytest.raises(ContainerStartError) as caught:
        runtime.start(make_spec(run_label, "noimage", image), secret())
    assert str(caught.value) == (
        f"Image {image} is not present locally. Pull or build it first: gpuci-tui image pull "
        f'or docker pull {image} (with [agents] pull = "never" gpuci-tui does not pull it)'
    )
    # Only the image lookup was made: no pull, no create.
    assert runtime.api_call_count - before == 1
    assert ours(docker_client, run_label) == []
    assert runtime.image_present(image) is False


@pytest.mark.parametrize("gpus", ["all", ("0",)], ids=["all", "device-ids"])
def test_gpu_request_without_nvidia_runtime(
    runtime: DockerRuntime,
    docker_client: Any,
    busybox_image: str,
    run_label: str,
    gpus: str | tuple[str, ...],
) -> None:
    # auto_remove off: Docker itself drops an auto-remove container whose start
    # failed, so only this shows that the runtime cleans up after itself.
    spec = make_spec(run_label, "gpu", busybox_image, gpus=gpus, auto_remove=False)
    with pytest.raises(ContainerStartError) as caught:
        runtime.start(spec, secret())
    assert str(caught.value) == NO_GPU_RUNTIME
    assert ours(docker_client, run_label) == []
    # The name is free at once: nothing half-made keeps it.
    info = runtime.start(make_spec(run_label, "gpu", busybox_image), secret())
    assert info.name == spec.name


def test_name_conflict(
    runtime: DockerRuntime, docker_client: Any, busybox_image: str, run_label: str
) -> None:
    first = runtime.start(make_spec(run_label, "dup", busybox_image), secret())
    with pytest.raises(ContainerNameConflictError, match=f"docker rm -f gpuci-rt-{run_label}-dup"):
        runtime.start(make_spec(run_label, "dup", busybox_image), secret())
    # The existing container is left alone.
    assert [c["Id"] for c in ours(docker_client, run_label)] == [first.id]
    assert docker_client.api.inspect_container(first.id)["State"]["Running"] is True


def test_failed_token_copy_leaves_nothing_behind(
    monkeypatch: pytest.MonkeyPatch, docker_client: Any, busybox_image: str, run_label: str
) -> None:
    client = docker.from_env(timeout=30)
    rt = DockerRuntime(client)

    def broken_put_archive(*args: Any, **kwargs: Any) -> bool:
        raise docker.errors.APIError("500 Server Error", explanation="no space left on device")

    monkeypatch.setattr(client.api, "put_archive", broken_put_archive)
    token = secret()
    try:
        with pytest.raises(ContainerStartError) as caught:
            rt.start(make_spec(run_label, "copy", busybox_image), token)
    finally:
        rt.close()
        client.close()
    assert str(caught.value) == (
        f"Docker could not copy the token file into container gpuci-rt-{run_label}-copy: "
        "no space left on device"
    )
    assert ours(docker_client, run_label) == []


def test_invalid_settings_are_explained(
    runtime: DockerRuntime, busybox_image: str, run_label: str
) -> None:
    with pytest.raises(ContainerStartError, match="Invalid container settings"):
        runtime.start(make_spec(run_label, "mem", busybox_image, mem_limit="8q"), secret())
    with pytest.raises(ContainerStartError, match="host path /nonexistent-gpuci-volume"):
        runtime.start(
            make_spec(
                run_label,
                "vol",
                busybox_image,
                volumes=(VolumeMount("/nonexistent-gpuci-volume", "/data"),),
            ),
            secret(),
        )


# --------------------------------------------------------------------------- events


def test_events_die_destroy_and_filter(
    runtime: DockerRuntime, busybox_image: str, run_label: str
) -> None:
    since = time.time() - 1
    mine = {"gpuci.test": run_label, "gpuci.case": "events"}
    collector = EventCollector(runtime, mine, since)
    other = runtime.start(
        make_spec(run_label, "other", busybox_image, command=("sh", "-c", "exit 0")), secret()
    )
    info = runtime.start(
        make_spec(run_label, "events", busybox_image, command=("sh", "-c", "exit 3")), secret()
    )
    die = collector.wait_for(lambda e: e.action == "die" and e.container_id == info.id)
    # Agents are not auto-removed: the supervisor removes a dead one, which makes the destroy.
    runtime.remove(info.id)
    collector.wait_for(lambda e: e.action == "destroy" and e.container_id == info.id)
    assert die.exit_code == 3
    assert die.name == info.name
    assert die.labels == mine
    assert abs(die.time - time.time()) < 60
    assert {e.action for e in collector.seen(lambda e: e.container_id == info.id)} >= {
        "create",
        "start",
        "die",
        "destroy",
    }
    assert collector.seen(lambda e: e.container_id == other.id) == []
    assert collector.close() < 1.0


def test_oom_event_and_exit_code(
    runtime: DockerRuntime, busybox_image: str, run_label: str
) -> None:
    collector = EventCollector(runtime, {"gpuci.test": run_label}, time.time() - 1)
    spec = make_spec(
        run_label,
        "oom",
        busybox_image,
        mem_limit="8m",
        auto_remove=False,
        command=("sh", "-c", "head -c 100m /dev/zero | tail"),
    )
    info = runtime.start(spec, secret())
    collector.wait_for(lambda e: e.action == "oom" and e.container_id == info.id, timeout=30)
    die = collector.wait_for(lambda e: e.action == "die" and e.container_id == info.id, timeout=30)
    assert die.exit_code == 137
    collector.close()
    detail = runtime.inspect(info.id)
    assert detail is not None
    assert (detail.status, detail.exit_code, detail.oom_killed) == ("exited", 137, True)
    (listed,) = runtime.list_containers({"gpuci.test": run_label})
    assert (listed.status, listed.exit_code, listed.oom_killed) == ("exited", 137, True)


# --------------------------------------------------------------------------- stop, remove, list, logs


def test_stop_honours_the_timeout(
    runtime: DockerRuntime, docker_client: Any, busybox_image: str, run_label: str
) -> None:
    # `sleep` as PID 1 has no SIGTERM handler, so the kernel ignores TERM: only
    # the SIGKILL after the timeout ends it.
    stubborn = runtime.start(
        make_spec(run_label, "stubborn", busybox_image, auto_remove=False), secret()
    )
    started = time.monotonic()
    runtime.stop(stubborn.id, timeout=1)
    elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 8, f"stop took {elapsed:.2f} s (timeout 1 s, Docker's default 10 s)"
    state = docker_client.api.inspect_container(stubborn.id)["State"]
    assert (state["Status"], state["ExitCode"]) == ("exited", 137)

    polite = runtime.start(
        make_spec(
            run_label,
            "polite",
            busybox_image,
            auto_remove=False,
            command=("sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.1; done"),
        ),
        secret(),
    )
    started = time.monotonic()
    runtime.stop(polite.id, timeout=20)
    assert time.monotonic() - started < 5
    assert docker_client.api.inspect_container(polite.id)["State"]["ExitCode"] == 0

    runtime.remove(polite.id)
    runtime.remove(polite.id)  # gone: fine
    runtime.stop(polite.id)  # gone: fine
    assert runtime.inspect(polite.id) is None
    assert runtime.logs_tail(polite.id) == []


def test_list_while_containers_come_and_go(
    runtime: DockerRuntime, busybox_image: str, run_label: str
) -> None:
    labels = {"gpuci.test": run_label}
    running = runtime.start(make_spec(run_label, "steady", busybox_image), secret())
    errors: list[BaseException] = []

    def churn() -> None:
        try:
            for i in range(8):
                # Docker's auto-remove (agents run without it) makes them vanish mid-listing.
                spec = make_spec(
                    run_label, f"churn{i}", busybox_image, command=("true",), auto_remove=True
                )
                runtime.start(spec, secret())
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    starter = threading.Thread(target=churn)
    starter.start()
    most_seen = 0
    lists = 0
    while starter.is_alive() or len(runtime.list_containers(labels)) > 1:
        found = runtime.list_containers(labels)
        lists += 1
        most_seen = max(most_seen, len(found))
        time.sleep(0.01)  # pacing, not synchronisation: the engine is shared
    starter.join()
    assert errors == []
    assert most_seen >= 2, "the churned containers were never seen by list_containers"
    final = runtime.list_containers(labels)
    assert [(c.id, c.status) for c in final] == [(running.id, "running")]
    assert final[0].started_at is not None and abs(final[0].started_at - time.time()) < 120
    assert lists > 3


def test_logs_tail(
    runtime: DockerRuntime, docker_client: Any, busybox_image: str, run_label: str
) -> None:
    script = "echo from stderr >&2; for i in $(seq 1 30); do echo line $i; done; printf 'bad \\377 byte\\n'"
    info = runtime.start(
        make_spec(
            run_label, "logs", busybox_image, auto_remove=False, command=("sh", "-c", script)
        ),
        secret(),
    )
    assert wait_until(
        lambda: docker_client.api.inspect_container(info.id)["State"]["Status"] == "exited"
    )
    # Docker orders stdout and stderr lines by its own read of each stream: the stderr line
    # may land anywhere, so only the stdout order is asserted.
    tail = [line for line in runtime.logs_tail(info.id, 3) if line != "from stderr"]
    assert tail[-2:] == ["line 30", "bad \ufffd byte"]
    everything = runtime.logs_tail(info.id, 100)
    assert len(everything) == 32 and "from stderr" in everything
    assert runtime.logs_tail(info.id, 0) == []


def test_image_metadata(
    runtime: DockerRuntime, docker_client: Any, busybox_image: str, run_label: str
) -> None:
    repository = "gpuci-fixture/runtime-env"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        entry = tarfile.TarInfo("etc")
        entry.type = tarfile.DIRTYPE
        tar.addfile(entry)
    docker_client.api.import_image_from_data(
        buffer.getvalue(),
        repository=repository,
        tag=run_label,
        changes=["ENV NVIDIA_REQUIRE_CUDA=cuda>=12.4 CUDA_VERSION=12.4.1", "LABEL gpuci.cuda=12.4"],
    )
    image = f"{repository}:{run_label}"
    try:
        assert runtime.image_present(image)
        config = runtime.image_config(image)
        assert config is not None and config.image_id.startswith("sha256:")
        env = config.env
        assert (env["NVIDIA_REQUIRE_CUDA"], env["CUDA_VERSION"]) == ("cuda>=12.4", "12.4.1")
        assert config.labels == {"gpuci.cuda": "12.4"}
    finally:
        docker_client.images.remove(image, force=True)
    assert runtime.image_config(image) is None
    busybox = runtime.image_config(busybox_image)
    assert busybox is not None and busybox.labels == {}
