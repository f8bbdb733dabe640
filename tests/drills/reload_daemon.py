"""``gpuci-tui run`` for the reload drills: the real daemon, plus SIGUSR1 as its reload.

Run as ``python -m tests.drills.reload_daemon --config PATH run``. Everything is
the real daemon; on SIGUSR1 it re-reads its configuration file and hands each
group's part to `Supervisor.reconfigure` (with ``GPUCI_DRILL_CANARY`` canaries
and ``GPUCI_DRILL_CANARY_JOBS`` jobs), writing each answer as a JSON line to
``GPUCI_DRILL_RELOAD_OUT``. The product's own ``reload`` (control op, CLI,
SIGHUP, groups added or removed) calls the same method; this launcher only
stands in for it so the engine's half can be drilled on its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from gpuci_tui.core.config.loader import load_config
from gpuci_tui.core.config.model import agent_groups, for_group
from gpuci_tui.core.host import daemon

_serve = daemon.serve


def _reload(supervised: Any, path: Path) -> None:
    fresh = load_config(path)
    canary = int(os.environ.get("GPUCI_DRILL_CANARY", "0"))
    jobs = os.environ.get("GPUCI_DRILL_CANARY_JOBS")
    lines = []
    for group in agent_groups(fresh):
        child = supervised.children[group.name]
        result = child.reconfigure(
            for_group(fresh, group), canary=canary, canary_jobs=int(jobs) if jobs else None
        )
        lines.append(json.dumps({"ok": result.ok, "message": result.message}))
    out = os.environ.get("GPUCI_DRILL_RELOAD_OUT")
    if out:
        with open(out, "a", encoding="utf-8") as file:
            file.write("\n".join(lines) + "\n")


async def _serve_with_reload(config: Any, **kwargs: Any) -> int:
    outer = kwargs.pop("ready", None)

    def ready(supervised: Any, server: Any) -> None:
        loop = asyncio.get_running_loop()
        assert config.path is not None
        loop.add_signal_handler(signal.SIGUSR1, _reload, supervised, Path(config.path))
        if outer is not None:
            outer(supervised, server)

    return await _serve(config, ready=ready, **kwargs)


if __name__ == "__main__":
    daemon.serve = _serve_with_reload  # type: ignore[assignment]
    from gpuci_tui.cli.main import main

    sys.exit(main(sys.argv[1:]))
