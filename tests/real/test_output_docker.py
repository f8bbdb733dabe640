"""DockerRuntime.follow_output and put_file on the real engine: the agent's lines and the go.

A busybox container prints the real agent's lines (behind the same UTC timestamp)
between other output; the follower reads them as they come, from the container's
start, and its facts are what the engine acts on. The go file reaches a running
container as a root-only file. A stop ends a follow of a container still running.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from gpuci_tui.core.docker.errors import ContainerOperationError
from gpuci_tui.core.docker.runtime import DockerRuntime
from gpuci_tui.core.engine.agent.output import (
    AwaitingGo,
    JobCompleted,
    Listening,
    RunningJob,
    parse_line,
)
from tests.real.docker_runtime_helpers import make_spec, secret

pytestmark = pytest.mark.docker

#: What the real agent prints, behind its timestamp; and a job writing to stdout.
SCRIPT = """
say() { printf '%s: %s\\n' "$(date -u '+%Y-%m-%d %H:%M:%SZ')" "$*"; }
echo '[start.sh] registered as gpu-0-b; waiting for the go file /run/azp/go'
while [ ! -e /run/azp/go ]; do sleep 0.1; done
say 'Listening for Jobs'
say 'Running job: train - main'
echo 'step 1: Listening for Jobs'
say 'Job train - main completed with result: Succeeded'
"""


def _follow(runtime: DockerRuntime, container_id: str, stop: threading.Event) -> list[str]:
    lines: list[str] = []
    thread = threading.Thread(
        target=lambda: lines.extend(runtime.follow_output(container_id, stop))
    )
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "the follow ends when the container ends"
    return lines


def test_the_agents_lines_are_followed_and_the_go_lets_it_on(
    runtime: DockerRuntime, busybox_image: str, run_label: str
) -> None:
    spec = make_spec(run_label, "lines", busybox_image, command=("sh", "-c", SCRIPT))
    info = runtime.start(spec, secret())
    seen: list[str] = []
    stop = threading.Event()
    thread = threading.Thread(target=lambda: seen.extend(runtime.follow_output(info.id, stop)))
    thread.start()
    deadline = time.monotonic() + 20
    while not any("waiting for the go" in line for line in seen):
        assert time.monotonic() < deadline, seen
        time.sleep(0.05)
    assert not any("Listening" in line for line in seen), "nothing before the go"
    runtime.put_file(info.id, "/run/azp/go", "go\n")
    thread.join(30)
    assert not thread.is_alive()
    facts = [fact for fact in map(parse_line, seen) if fact is not None]
    assert [type(fact) for fact in facts] == [AwaitingGo, Listening, RunningJob, JobCompleted]
    assert facts[2] == RunningJob("train - main", facts[2].stamp)
    assert abs(facts[1].stamp - time.time()) < 120  # type: ignore[union-attr]
    assert "step 1: Listening for Jobs" in seen, "read, but not a fact"


def test_a_stop_ends_the_follow_of_a_running_container(
    runtime: DockerRuntime, busybox_image: str, run_label: str
) -> None:
    info = runtime.start(make_spec(run_label, "quiet", busybox_image), secret())
    stop = threading.Event()
    done = threading.Event()

    def follow() -> None:
        list(runtime.follow_output(info.id, stop))
        done.set()

    threading.Thread(target=follow, daemon=True).start()
    time.sleep(0.3)  # blocked in the stream's read: the container prints nothing
    assert not done.is_set()
    stopped = time.monotonic()
    stop.set()
    assert done.wait(5), "the stream is closed from outside"
    assert time.monotonic() - stopped < 2.0


def test_a_gone_container_has_no_output_and_takes_no_file(
    runtime: DockerRuntime, docker_client: Any, busybox_image: str, run_label: str
) -> None:
    info = runtime.start(make_spec(run_label, "gone", busybox_image), secret())
    runtime.remove(info.id)
    assert _follow(runtime, info.id, threading.Event()) == []
    with pytest.raises(ContainerOperationError, match="could not write /run/azp/go"):
        runtime.put_file(info.id, "/run/azp/go", "go\n")
