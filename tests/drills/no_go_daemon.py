"""``gpuci-tui run`` whose engine refuses every write into a container: the go never arrives.

Run as ``python -m tests.drills.no_go_daemon --config PATH run``. Everything is the
real daemon on the real engine, and its agents are real emulator containers that
register and wait at their start gate; only `DockerRuntime.put_file`, the one call
that delivers the go file, answers as an engine that refuses the write would.
"""

from __future__ import annotations

import sys

from gpuci_tui.core.docker.errors import ContainerOperationError
from gpuci_tui.core.docker.runtime import DockerRuntime


def _refused(self: DockerRuntime, container_id: str, path: str, content: str) -> None:
    raise ContainerOperationError(
        f"Docker could not write {path} into {container_id[:12]}: read-only file system"
    )


if __name__ == "__main__":
    DockerRuntime.put_file = _refused  # type: ignore[method-assign]
    from gpuci_tui.cli.main import main

    sys.exit(main(sys.argv[1:]))
