"""The real components a test may need, the markers that say so, and the guard that holds tests to them.

A test that needs a component carries its marker (module-level ``pytestmark`` is
fine); a test with none of them is in the quick tier (``scripts/test.sh --quick``,
``pytest --quick``), which runs on a developer's machine with no Docker engine,
terminal, keyring, sshd, registry or root, in a few minutes.

"Network" is no component: every tier talks to 127.0.0.0/8 only (the project's
rule), and a loopback server inside the test process (the simulated organisation,
a fake HTTP endpoint) needs nothing a developer's machine lacks. What is a
component is a program of its own: a ``gpuci-tui run`` daemon process is one
(``daemon``), as are an sshd, a registry and a Docker engine.

A test that uses a component without its marker fails, whichever tier runs it
(a quick tier that quietly needs Docker is no quick tier):

- by its fixtures: `Component.fixtures` names the fixtures that provide it, and a
  test that requests one, even through another fixture, must carry the marker;
- by what it starts: every program the test process runs goes through
  `subprocess.Popen`, whose start is watched (`install_guards`), as is a docker-py
  client connecting to an engine; helpers that start a component in other ways
  call `need`.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class Component:
    """Something real a test may need that a developer's machine may lack."""

    marker: str
    needs: str
    fixtures: frozenset[str] = frozenset()
    programs: frozenset[str] = frozenset()


COMPONENTS = (
    Component(
        "docker",
        "a real Docker engine (the host's, or a private dockerd the test starts and stops)",
        frozenset({"docker_client"}),
        frozenset({"docker", "dockerd", "containerd"}),
    ),
    Component(
        "keyring_real",
        "a real Secret Service (dbus-run-session and gnome-keyring-daemon)",
        programs=frozenset({"dbus-run-session", "dbus-daemon", "gnome-keyring-daemon"}),
    ),
    Component(
        "tmux", "a real terminal: the real binary driven in tmux", programs=frozenset({"tmux"})
    ),
    # Not by "gcc": ctypes.util.find_library runs it too. build_fake_nvml says it (`need`).
    Component(
        "nvml",
        "the fake libnvidia-ml.so.1, built with gcc",
        frozenset({"fake_nvml_lib", "fake_nvml_old_driver_lib"}),
    ),
    Component(
        "sshd",
        # Not "ssh": the quick tier's tests may run a stand-in script of that name.
        "a real sshd on 127.0.0.1 (openssh-server)",
        programs=frozenset({"sshd", "ssh-keygen"}),
    ),
    Component(
        "registry",
        "a real image registry (docker-registry) on 127.0.0.1",
        programs=frozenset({"docker-registry", "htpasswd"}),
    ),
    # Known by its command line (`component_of`): `gpuci-tui … run`, `python -m … run`.
    Component("daemon", "a `gpuci-tui run` daemon started as a process of its own"),
    Component(
        "root",
        "root: a second local user, a tmpfs mount, a privilege drop",
        programs=frozenset({"useradd", "userdel", "mount", "umount", "setpriv"}),
    ),
)
BY_MARKER = {component.marker: component for component in COMPONENTS}

SERIAL = "serial"
"""The marker of a test that cannot share the machine: the full run runs it alone, after the rest."""

SLOW = "slow"
"""The marker of a test that needs no component but takes long (a soak): the full run runs
it, the quick tier leaves it out (that tier answers in minutes)."""


def markers_of(item: pytest.Item) -> set[str]:
    """The component markers ``item`` carries."""
    return {mark.name for mark in item.iter_markers() if mark.name in BY_MARKER}


def quick(item: pytest.Item) -> bool:
    """Whether ``item`` is in the quick tier: it needs no component, and is not `SLOW`."""
    return not markers_of(item) and item.get_closest_marker(SLOW) is None


def unmarked_message(marker: str, how: str) -> str:
    """What a test that uses a component without its marker is told."""
    component = BY_MARKER[marker]
    return (
        f"this test uses {component.needs} ({how}) but is not marked "
        f"@pytest.mark.{marker}: mark it (the module's pytestmark is fine), "
        "so that the quick tier leaves it out"
    )


def unmarked_fixtures(item: pytest.Item) -> list[str]:
    """Why ``item`` fails before it starts: the components its fixtures provide, unmarked."""
    requested = set(getattr(item, "fixturenames", ()))
    carried = markers_of(item)
    return [
        unmarked_message(c.marker, f"fixture {', '.join(sorted(c.fixtures & requested))}")
        for c in COMPONENTS
        if c.fixtures & requested and c.marker not in carried
    ]


# ----------------------------------------------------------------- the guard while tests run


class _Running:
    """The test being run in this process, and what it used without its marker."""

    item: pytest.Item | None = None
    lock = threading.Lock()
    found: dict[str, list[str]] = {}


def enter(item: pytest.Item | None) -> None:
    """``item`` starts (its fixtures, then its call); None: between tests."""
    _Running.item = item


def used_unmarked(item: pytest.Item) -> list[str]:
    """What ``item`` used without its marker (and forgets it)."""
    with _Running.lock:
        return _Running.found.pop(item.nodeid, [])


def need(marker: str, how: str) -> None:
    """The running test is about to use component ``marker`` (``how``: what it starts).

    Fails the test when it lacks the marker: raises here (a `pytest.fail` outcome,
    which ``except Exception`` in the code under test does not swallow), and records
    it, so that a use from another thread fails the test too when it ends.
    """
    item = _Running.item
    if item is None or marker in markers_of(item):
        return
    message = unmarked_message(marker, how)
    if threading.current_thread() is not threading.main_thread():
        message += f" [in thread {threading.current_thread().name}]"
    with _Running.lock:
        _Running.found.setdefault(item.nodeid, []).append(message)
    pytest.fail(message, pytrace=False)


def _words(args: Any) -> list[str]:
    if isinstance(args, (str, bytes, os.PathLike)):
        text = os.fsdecode(args)
        try:
            return shlex.split(text)
        except ValueError:
            return text.split()
    return [os.fsdecode(a) for a in args]


def _is_daemon(words: Sequence[str]) -> bool:
    """``gpuci-tui … run`` or ``python -m gpuci_tui… / tests.… … run`` (a drill's launcher)."""
    if "run" not in words[1:]:
        return False
    program = os.path.basename(words[0])
    if program == "gpuci-tui":
        return True
    if "-m" in words[:-1]:
        module = words[words.index("-m") + 1]
        return module.startswith(("gpuci_tui", "tests."))
    return False


def component_of(words: Sequence[str]) -> str | None:
    """The component a command line starts (None: none)."""
    if not words:
        return None
    if _is_daemon(words):
        return "daemon"
    program = os.path.basename(words[0])
    return next((c.marker for c in COMPONENTS if program in c.programs), None)


def _watch_popen() -> Callable[[], None]:
    popen = subprocess.Popen
    original: Any = popen._execute_child  # type: ignore[attr-defined]

    def execute_child(self: Any, args: Any, executable: Any, *rest: Any, **kw: Any) -> Any:
        words = _words(args)
        if executable is not None and words:
            words = [os.fsdecode(executable), *words[1:]]
        marker = component_of(words)
        if marker is not None:
            need(marker, f"it runs {shlex.join(words[:3])}")
        return original(self, args, executable, *rest, **kw)

    popen._execute_child = execute_child  # type: ignore[attr-defined]

    def undo() -> None:
        popen._execute_child = original  # type: ignore[attr-defined]

    return undo


def _watch_docker_clients() -> Callable[[], None]:
    try:
        from docker.api.client import APIClient
    except ImportError:  # no docker-py: nothing to watch
        return lambda: None
    original = APIClient.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        # Only a client that reached an engine uses one: docker-py asks the engine
        # for its API version when none is given (a client of a missing socket, made
        # to test the messages about it, fails before this line).
        if kwargs.get("version") in (None, "auto"):
            need("docker", f"a docker-py client of {self.base_url}")

    APIClient.__init__ = init  # type: ignore[method-assign]

    def undo() -> None:
        APIClient.__init__ = original  # type: ignore[method-assign]

    return undo


def install_guards() -> Callable[[], None]:
    """Watch the programs the test process starts and the engines it connects to."""
    undo = [_watch_popen(), _watch_docker_clients()]

    def uninstall() -> None:
        for step in reversed(undo):
            step()

    return uninstall
