"""``status``, ``drain``, ``resume``, ``restart``, ``scale``, ``pause``, ``unpause``, ``stop``."""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from typing import Any

from gpuci_tui.core.control import ControlError, request
from gpuci_tui.core.models import (
    Command,
    Drain,
    Pause,
    Restart,
    Resume,
    Scale,
    SlotState,
    Stop,
    Unpause,
    snapshot_from_dict,
    to_dict,
)

from . import exitcodes
from .common import CliExit, fail, load, socket_for
from .render import render_status


def _slots(args: argparse.Namespace) -> tuple[int, ...] | None:
    if args.all and args.slots:
        raise CliExit(exitcodes.USAGE, f"{args.command}: give slot numbers or --all, not both")
    if args.all:
        return None
    if not args.slots:
        raise CliExit(exitcodes.USAGE, f"{args.command}: which slots? Give SLOT numbers or --all")
    return tuple(args.slots)


def build_command(args: argparse.Namespace) -> Command:
    """The command dataclass for the parsed arguments."""
    name = args.command
    if name == "drain":
        return Drain(_slots(args))
    if name == "resume":
        return Resume(_slots(args))
    if name == "restart":
        return Restart(_slots(args))
    if name == "scale":
        return Scale(args.count)
    if name == "pause":
        return Pause()
    if name == "unpause":
        return Unpause()
    if name == "stop":
        return Stop(drain=args.drain)
    raise CliExit(exitcodes.USAGE, f"unknown command {name}")


def run_control_command(args: argparse.Namespace) -> int:
    """Talk to the daemon of the configured agents."""
    try:
        config = load(args)
        path = socket_for(config)
        if args.command == "status":
            return _status(path, args.json)
        command = build_command(args)
        reply = request(path, {"op": "command", "command": to_dict(command)})
        result = reply.get("result") or {}
        message = result.get("message") or reply.get("error") or "no answer"
        if not reply.get("ok"):
            print(f"gpuci-tui: {message}", file=sys.stderr)
            return exitcodes.FAILED
        print(message)
        if args.command == "drain" and args.wait:
            return _wait_drained(path, command, args.timeout)
        return exitcodes.OK
    except CliExit as exc:
        return fail(exc)
    except ControlError as exc:
        print(f"gpuci-tui: {exc}", file=sys.stderr)
        return exitcodes.NO_DAEMON


def _status(path: Any, as_json: bool) -> int:
    reply = request(path, {"op": "status"})
    data = reply.get("snapshot")
    if not isinstance(data, dict):
        raise ControlError(str(reply.get("error", "no snapshot in the daemon's answer")))
    if as_json:
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        print(render_status(snapshot_from_dict(data)))
    return exitcodes.OK


def _wait_drained(path: Any, command: Drain, timeout: float) -> int:
    """Follow the daemon's stream until every targeted slot is drained."""
    deadline = time.monotonic() + timeout if timeout > 0 else None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(path))
    sock.settimeout(1.0)
    sock.sendall(b'{"op":"subscribe"}\n')
    buffer = b""
    try:
        while True:
            if deadline is not None and time.monotonic() > deadline:
                print("gpuci-tui: timed out waiting for the drain", file=sys.stderr)
                return exitcodes.FAILED
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                print("gpuci-tui: the daemon went away while draining", file=sys.stderr)
                return exitcodes.NO_DAEMON
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                message = json.loads(line)
                if message.get("type") == "event":
                    print(message["data"].get("message", ""))
                if message.get("type") != "snapshot":
                    continue
                snap = snapshot_from_dict(message["data"])
                wanted = [s for s in snap.slots if command.slots is None or s.slot in command.slots]
                if all(s.state == SlotState.DRAINED for s in wanted):
                    print("drained: " + (", ".join(s.name for s in wanted) or "no slots"))
                    return exitcodes.OK
    finally:
        sock.close()
