"""GPU capabilities survive Docker → bash start.sh → config.sh/run.sh → the agent process.

The Azure Pipelines agent reports its process environment as capabilities
(EnvironmentCapabilitiesProvider, minus VSO_AGENT_IGNORE). The capability names
(``gpu.product``, ``cuda.driver-version.full``) are no shell identifiers: dash
and busybox sh drop such names from what their children see, bash passes them
on. These tests prove the image's path keeps them: start.sh and the agent's
wrappers are bash, and the stub listener records the environment it was
started with (/proc/self/environ, what .NET's GetEnvironmentVariables reads).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from gpuci_tui.core.config.loader import AgentsConfig, AzureConfig, Config
from gpuci_tui.core.docker.agentspec import build_spec
from gpuci_tui.core.docker.runtime import DockerRuntime
from gpuci_tui.core.gpu.capabilities import GpuFacts, HostGpuFacts, slot_capabilities
from tests.dockeragent.start_sh_harness import BAKED_VERSION, LISTENER, START_SH, WRAPPER, Agent
from tests.waiting import wait_until

H100 = GpuFacts(0, "GPU-93cb0da6", "NVIDIA H100 80GB HBM3", 81559, (9, 0), True)
CAPS = slot_capabilities(HostGpuFacts("580.159.04", (13, 0), (H100,)), (H100,), "gpubox3")


def _check(env: dict[str, str]) -> None:
    assert {k: env.get(k) for k in CAPS} == CAPS
    ignored = set(env["VSO_AGENT_IGNORE"].split(","))
    assert not ignored & set(CAPS), "start.sh must not hide the GPU capabilities"


def test_bash_start_sh_passes_dotted_names_to_config_and_run(agent: Agent) -> None:
    result = agent.run(**CAPS)
    assert result.code == 0, result.out
    _check(agent.environ("configure"))
    _check(agent.environ("run"))


# --------------------------------------------------------------------------- in Docker


def _libraries(binary: str) -> list[str]:
    """The shared libraries ``binary`` loads (ldd), as real paths."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
        if path.startswith("/"):
            found.append(path)
    return found


def _image_tar() -> bytes:
    """busybox + the host's bash and its libraries + start.sh + the stub agent."""
    busybox = shutil.which("busybox") or "/bin/busybox"
    bash = shutil.which("bash") or "/bin/bash"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add(name: str, data: bytes, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name.lstrip("/"))
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))

        def add_dir(name: str, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)

        for d in ("bin", "usr", "usr/bin", "etc", "run", "tmp", "proc", "sys", "dev", "rec"):
            add_dir(d, 0o1777 if d in ("tmp", "rec") else 0o755)
        add("bin/busybox", Path(busybox).read_bytes())
        for applet in ("sh", "tr", "id", "cat", "rm", "mkdir", "stat", "dirname", "sleep", "env",
                       "chown", "uname", "touch"):  # fmt: skip
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
        env_link = tarfile.TarInfo("usr/bin/env")
        env_link.type, env_link.linkname = tarfile.SYMTYPE, "/bin/busybox"
        tar.addfile(env_link)
        add("bin/bash", Path(bash).read_bytes())
        for lib in _libraries(bash):
            add(lib, Path(os.path.realpath(lib)).read_bytes())
        add("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n", 0o644)
        add("azp/start.sh", START_SH.read_bytes())
        for name, mode in (("config.sh", "configure"), ("run.sh", "run")):
            add(
                f"azp/agent/{name}",
                WRAPPER.replace("{name}", name).replace("{mode}", mode).encode(),
            )
        add("azp/agent/bin/Agent.Listener", LISTENER.encode())
        add("azp/agent/.image-agent-version", f"{BAKED_VERSION}\n".encode(), 0o644)
    return buf.getvalue()


@pytest.mark.docker
def test_an_agent_container_started_by_the_supervisor_keeps_the_capabilities(
    docker_client: Any, run_label: str
) -> None:
    if not Path("/bin/bash").exists() or shutil.which("ldd") is None:
        pytest.fail("bash and ldd are needed to build the test image")
    repository, tag = "gpuci-test/startsh-bash", run_label
    docker_client.api.import_image_from_data(
        _image_tar(),
        repository=repository,
        tag=tag,
        changes=[
            "ENV PATH=/bin:/usr/bin AZP_AGENT_SOURCE=/azp/agent AZP_TEST_SKIP_PRIVDROP=1 "
            "AZP_SKIP_VERSION_CHECK=1 STUB_RECORD_DIR=/rec STUB_TOKEN_PATH=/run/azp/token",
            'ENTRYPOINT ["/azp/start.sh"]',  # exec form, as the real image: no /bin/sh -c
        ],
    )
    image = f"{repository}:{tag}"
    runtime = DockerRuntime(docker_client)
    try:
        config = Config(
            azure=AzureConfig(url="http://127.0.0.1:9/org", pool="gpu"),
            agents=AgentsConfig(
                count=1, image=image, name_prefix=f"sh{run_label}", gpus="none", network="host"
            ),
        )
        spec = build_spec(config, 0, extra_labels={"gpuci.test": run_label}, capabilities=CAPS)
        info = runtime.start(spec, "a-pat-0123456789")
        container = docker_client.containers.get(info.id)

        def exited() -> bool:
            container.reload()
            return bool(container.status == "exited")

        wait_until(exited, 30, lambda: f"the container to exit: {container.logs()!r}")
        assert container.attrs["State"]["ExitCode"] == 0, container.logs().decode(errors="replace")
        for mode in ("configure", "run"):
            chunks, _ = container.get_archive(f"/rec/{mode}.env")
            with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
                member = tar.extractfile(f"{mode}.env")
                assert member is not None
                lines = member.read().decode().splitlines()
            _check(dict(line.split("=", 1) for line in lines if "=" in line))
    finally:
        runtime.close()
        for c in docker_client.containers.list(all=True, filters={"ancestor": image}):
            c.remove(force=True)
        docker_client.images.remove(image, force=True)
