"""``gpuci-tui gpu clear GPU``: release a quarantined GPU, after a confirmation.

A GPU that raised a critical Xid, uncorrectable ECC errors or a row-remap
failure stays quarantined until an operator clears it (see docs/gpus.md,
"Shared and failing GPUs"). The daemon says what the clear would do (its preview);
this asks before sending it, unless ``--yes``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gpuci_tui.core.command_types import GpuClear
from gpuci_tui.core.engine.preview import gpu_clear_words
from gpuci_tui.core.host.control.client import ControlClient, ControlError

from . import exitcodes
from .common import CliExit, fail, no_daemon, print_result
from .gpu_caps_cmd import add_caps_parser, run_caps
from .reach import daemon_of


def add_gpu_parser(sub: Any) -> None:
    """The ``gpu`` command and its ``clear`` action."""
    gpu = sub.add_parser(
        "gpu", help="clear a quarantined GPU; show the GPU capabilities agents advertise"
    )
    actions = gpu.add_subparsers(dest="gpu_action", metavar="ACTION", required=True)
    clear = actions.add_parser(
        "clear",
        help="forget a GPU's Xid/ECC/row-remap faults so its agents take jobs again",
    )
    clear.add_argument("gpu", metavar="GPU", help="NVML index (0), UUID (GPU-…), or all")
    clear.add_argument("--yes", action="store_true", help="do not ask for a confirmation")
    add_caps_parser(actions)


def run_gpu(args: argparse.Namespace) -> int:
    """``gpu clear``: preview, confirm, send."""
    if args.gpu_action == "capabilities":
        return run_caps(args)
    command = GpuClear(args.gpu)
    try:
        client = ControlClient(daemon_of(args).socket)
        answer = client.preview(command)
        if not answer.ok:
            print(f"gpuci-tui: {answer.message}", file=sys.stderr)
            return exitcodes.FAILED
        if not answer.message.startswith("clears: "):
            print(answer.message)
            return exitcodes.OK
        if not args.yes:
            if not sys.stdin.isatty():
                raise CliExit(
                    exitcodes.USAGE, "gpu clear: no terminal to confirm on; add --yes to clear"
                )
            print(gpu_clear_words(answer, args.gpu))
            if input("Clear it? [y/N] ").strip().lower() not in ("y", "yes"):
                print("not cleared")
                return exitcodes.OK
        result = client.send(command)
        return print_result(result)
    except CliExit as exc:
        return fail(exc)
    except ControlError as exc:
        return no_daemon(exc)
