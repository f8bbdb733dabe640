"""The token file goes from a container whatever the image holds, ``rm`` or not.

Distroless and minimal images have no program the daemon could run to delete
the file: `DockerRuntime.remove_file` then empties it through the archive API.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import tarfile
from typing import Any

import docker.errors
import pytest

from gpuci_tui.core.docker.agentspec import TOKEN_PATH
from gpuci_tui.core.docker.runtime import DockerRuntime
from tests.machine import machine_lock
from tests.real.docker_runtime_helpers import make_spec, secret

pytestmark = pytest.mark.docker

NO_RM_IMAGE = "gpuci-fixture/no-rm:1"


@pytest.fixture(scope="module")
def no_rm_image(docker_client: Any) -> str:
    """FROM scratch with one static binary (busybox without its applet links: no rm, no sh)."""
    # One import per machine: a second one at the same time would move the tag.
    with machine_lock("image-no-rm"):
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.get(NO_RM_IMAGE)
            return NO_RM_IMAGE
        busybox = shutil.which("busybox") or "/bin/busybox"
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for d in ("bin", "run"):
                info = tarfile.TarInfo(d)
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            tar.add(busybox, arcname="bin/busybox")
        docker_client.api.import_image_from_data(
            buf.getvalue(), repository=NO_RM_IMAGE.split(":")[0], tag="1"
        )
    return NO_RM_IMAGE


def token_file(docker_client: Any, cid: str) -> tarfile.TarInfo | None:
    """The token file's tar header (None when it is gone); its bytes are checked to be empty."""
    try:
        stream, _stat = docker_client.api.get_archive(cid, TOKEN_PATH)
    except docker.errors.NotFound:
        return None
    data = b"".join(stream)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        (member,) = tar.getmembers()
        extracted = tar.extractfile(member)
        assert extracted is not None
        assert extracted.read() == b""
    return member


def test_an_image_without_rm_loses_its_token_file(
    runtime: DockerRuntime, docker_client: Any, no_rm_image: str, run_label: str
) -> None:
    token = secret()
    # Only "busybox sleep" runs: there is no rm (nor sh) on the image's PATH.
    spec = make_spec(run_label, "no-rm", no_rm_image, command=("/bin/busybox", "sleep", "300"))
    with pytest.raises(docker.errors.APIError):
        docker_client.containers.run(
            no_rm_image, ["rm", "-f", "/x"], labels={"gpuci.test": run_label}
        )
    info = runtime.start(spec, token)
    assert docker_client.containers.get(info.id).status == "running"
    before = runtime.api_call_count
    assert runtime.remove_file(info.id, TOKEN_PATH) is True
    # Read; rm tried (exec create + start) and read back; overwritten and read back.
    assert runtime.api_call_count - before == 6
    member = token_file(docker_client, info.id)
    assert member is not None and member.size == 0 and member.mode & 0o777 == 0
    assert docker_client.containers.get(info.id).status == "running"
    # Once empty, a second sweep costs one read.
    before = runtime.api_call_count
    assert runtime.remove_file(info.id, TOKEN_PATH) is True
    assert runtime.api_call_count - before == 1


def test_an_image_that_deletes_the_file_costs_one_read(
    runtime: DockerRuntime, docker_client: Any, busybox_image: str, run_label: str
) -> None:
    spec = make_spec(run_label, "deletes", busybox_image)
    info = runtime.start(spec, secret())
    docker_client.containers.get(info.id).exec_run(["rm", "-f", TOKEN_PATH])
    before = runtime.api_call_count
    assert runtime.remove_file(info.id, TOKEN_PATH) is True
    assert runtime.api_call_count - before == 1
    assert token_file(docker_client, info.id) is None, "nothing is put back"


def test_an_image_with_rm_has_the_file_deleted(
    runtime: DockerRuntime, docker_client: Any, busybox_image: str, run_label: str
) -> None:
    info = runtime.start(make_spec(run_label, "keeps", busybox_image), secret())
    before = runtime.api_call_count
    assert runtime.remove_file(info.id, TOKEN_PATH) is True
    assert runtime.api_call_count - before == 4  # read, exec create + start, read back
    assert token_file(docker_client, info.id) is None
