"""``gpuci-tui image pull [--group NAME]``: pull the configured images with live progress.

It goes through Docker directly, not through the daemon: a pull is idempotent,
and Docker itself joins two pulls of one image (the daemon's and this one) into
one download. Credentials are Docker's own (``docker login``, credential
helpers; ``DOCKER_CONFIG`` respected); gpuci-tui stores none. On a terminal the
progress is one line rewritten in place with a bar; otherwise (a pipe, CI) plain
lines, one per finished layer and at most one every `PLAIN_EVERY` seconds. An
explicit pull runs whatever the group's ``pull`` policy (``never`` is about the
daemon pulling on its own). Below Docker's disk hard floor no pull starts.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from gpuci_tui.core.config.loader import Config, agent_groups
from gpuci_tui.core.docker.pull_progress import PullProgress, decimal_bytes

from . import exitcodes
from .common import CliExit, fail, load

#: Seconds between two progress lines when the output is not a terminal.
PLAIN_EVERY = 5.0
#: Seconds between two redraws of the terminal line.
REDRAW_EVERY = 0.1
BAR_WIDTH = 24


def add_image_parser(sub: Any) -> None:
    """The ``image`` command and its ``pull`` action."""
    image = sub.add_parser("image", help="agent images: pull the configured images")
    actions = image.add_subparsers(dest="image_action", metavar="ACTION", required=True)
    pull = actions.add_parser(
        "pull",
        help="pull each group's image now, with progress (Docker's own credentials)",
        description="Pull the image of every agent group (or of --group) through Docker, "
        "showing layers, bytes, rate and ETA. Runs whatever the group's pull policy.",
    )
    pull.add_argument("--group", help="only this agent group's image")


class ProgressLine:
    """Shows a pull's progress: a line rewritten in place on a terminal, plain lines otherwise."""

    def __init__(self, out: TextIO, tty: bool, clock: Any = time.monotonic) -> None:
        """Write to ``out``; ``tty`` picks the form."""
        self.out = out
        self.tty = tty
        self.clock = clock
        self._shown_at = -1e9
        self._layers = -1

    def __call__(self, progress: PullProgress) -> None:
        """Show ``progress`` (throttled)."""
        now = self.clock()
        if self.tty:
            if now - self._shown_at >= REDRAW_EVERY:
                self._shown_at = now
                self.out.write(f"\r\033[K{bar(progress)} {progress.describe()}")
                self.out.flush()
            return
        if progress.layers_done != self._layers or now - self._shown_at >= PLAIN_EVERY:
            self._layers = progress.layers_done
            self._shown_at = now
            print(progress.describe(), file=self.out, flush=True)

    def end(self) -> None:
        """Leave the terminal line (the next output starts on a fresh line)."""
        if self.tty and self._shown_at > -1e9:
            self.out.write("\r\033[K")
            self.out.flush()


def bar(progress: PullProgress, width: int = BAR_WIDTH) -> str:
    """``[#######-----]`` for the bytes known so far."""
    done = progress.bytes_done / progress.bytes_total if progress.bytes_total else 0.0
    filled = min(width, int(done * width))
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def images_of(config: Config, group: str | None) -> list[str]:
    """The distinct images of every group, or of ``group``."""
    groups = agent_groups(config)
    if group is not None:
        chosen = [g for g in groups if g.name == group and not g.implicit]
        if not chosen:
            names = ", ".join(g.name for g in groups if not g.implicit) or "none: no [groups]"
            raise CliExit(exitcodes.USAGE, f"no agent group {group!r} (groups: {names})")
        groups = tuple(chosen)
    return list(dict.fromkeys(g.agents.image for g in groups))


def run_image(args: argparse.Namespace) -> int:
    """``image pull``: each image in turn; exit 1 when one failed."""
    from gpuci_tui.core.docker.runtime import DockerRuntime
    from gpuci_tui.core.engine.disk_gc import disk_state, pull_refusal
    from gpuci_tui.core.errors import ImagePullError, RuntimeUnavailableError
    from gpuci_tui.core.host.images.puller import ImagePuller

    try:
        config = load(args)
        images = images_of(config, args.group)
    except CliExit as exc:
        return fail(exc)
    if (refused := _demo_refusal(args)) is not None:
        print(f"gpuci-tui: {refused}", file=sys.stderr)
        return exitcodes.FAILED
    runtime = DockerRuntime()
    try:
        try:
            usage = runtime.disk.disk_usage()
        except RuntimeUnavailableError as exc:
            print(f"gpuci-tui: {exc}", file=sys.stderr)
            return exitcodes.RUNTIME
        floor = config.docker.hard_floor_bytes
        state = disk_state(usage.free_bytes, config.docker.min_free_bytes, floor)
        refused = pull_refusal(state, usage.free_bytes, floor)
        if refused is not None:
            print(f"gpuci-tui: {refused}", file=sys.stderr)
            return exitcodes.FAILED
        puller = ImagePuller(runtime.registry)
        failed = False
        for image in images:
            shown = ProgressLine(sys.stdout, sys.stdout.isatty())
            began = time.monotonic()
            try:
                final = puller.pull(image, on_progress=shown)
            except ImagePullError as exc:
                shown.end()
                print(f"gpuci-tui: {exc}", file=sys.stderr)
                failed = True
                continue
            except RuntimeUnavailableError as exc:
                shown.end()
                print(f"gpuci-tui: {exc}", file=sys.stderr)
                return exitcodes.RUNTIME
            shown.end()
            size = f", {decimal_bytes(final.bytes_total)} downloaded" if final.bytes_total else ""
            took = time.monotonic() - began
            print(f"{final.describe()} in {took:.1f} s{size}")
        return exitcodes.FAILED if failed else exitcodes.OK
    finally:
        runtime.close()


def _demo_refusal(args: argparse.Namespace) -> str | None:
    """Why nothing is pulled for a demo's configuration, said plainly; None: pull.

    A demo's agents may not be in Docker at all, or the demo may have no registry.
    """
    from gpuci_tui.demo_instance import notes_of

    from .common import config_path

    notes = notes_of(config_path(args))
    return notes.pull if notes is not None and notes.pull else None
