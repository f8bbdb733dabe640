"""gpuci_tui.core must stay UI-free: importing any of its modules never loads Textual or Rich."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import gpuci_tui.core


def _core_modules() -> list[str]:
    """Every module of core, sub-packages included."""
    found = pkgutil.walk_packages(gpuci_tui.core.__path__, prefix="gpuci_tui.core.")
    return sorted(info.name for info in found)


def test_core_has_modules() -> None:
    assert "gpuci_tui.core.host.supervision.supervisor" in _core_modules()


def test_core_never_imports_textual_or_rich() -> None:
    modules = _core_modules()
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"core pulled in UI modules: {out.stdout.strip()}"


def test_sim_never_imports_textual() -> None:
    code = (
        "import importlib, pkgutil, sys, gpuci_tui.sim as s\n"
        "for i in pkgutil.iter_modules(s.__path__):\n"
        "    importlib.import_module('gpuci_tui.sim.' + i.name)\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] == 'textual')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


#: All the engine may load of gpuci_tui besides the two package roots: itself and the base
#: (tier 0 of tests/test_core_structure.py).
ENGINE_MAY_LOAD = ("gpuci_tui.core.engine",) + tuple(
    f"gpuci_tui.core.{name}"
    for name in (
        "models", "command_types", "protocols", "errors", "wording", "formatting", "wire",
        "registrations", "host_readings",
        "gpu_readings",
    )
)  # fmt: skip
#: Libraries that talk to the outside world, or parse files: importing the engine loads none.
#: (os, pathlib and the like are loaded by the interpreter itself; the source check in
#: tests/test_core_structure.py holds the engine's own imports to account for them.)
ENGINE_NEVER_LOADS = (
    "docker", "requests", "urllib3", "http", "socket", "ssl", "sqlite3", "subprocess", "asyncio",
    "selectors", "select", "tomllib", "tomli", "tomli_w", "pynvml", "keyring", "platformdirs",
    "prometheus_client", "shutil", "tempfile", "multiprocessing", "concurrent", "textual", "rich",
)  # fmt: skip


def _engine_modules() -> list[str]:
    import gpuci_tui.core.engine

    found = pkgutil.walk_packages(gpuci_tui.core.engine.__path__, prefix="gpuci_tui.core.engine.")
    return sorted(info.name for info in found)


def _loaded_by(modules: list[str]) -> list[str]:
    """The modules a fresh interpreter loads to import ``modules`` (that it had not already)."""
    code = (
        "import importlib, sys\n"
        "before = set(sys.modules)\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(','.join(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip().split(",")


def _outside_the_engine(loaded: list[str]) -> list[str]:
    """What of ``loaded`` the engine may not load: other parts of gpuci_tui, outside libraries."""
    ours = [m for m in loaded if m.split(".")[0] == "gpuci_tui"]
    strays = [
        m
        for m in ours
        if m not in ("gpuci_tui", "gpuci_tui.core")
        and not any(m == p or m.startswith(p + ".") for p in ENGINE_MAY_LOAD)
    ]
    return sorted(strays) + sorted(m for m in loaded if m.split(".")[0] in ENGINE_NEVER_LOADS)


def test_the_engine_loads_only_itself_the_base_and_pure_standard_library() -> None:
    """Every module of ``core.engine``, imported in a fresh interpreter, pulls in nothing else."""
    modules = _engine_modules()
    assert "gpuci_tui.core.engine.transitions.apply" in modules
    loaded = _loaded_by(modules)
    assert "gpuci_tui.core.engine.transitions.apply" in loaded
    outside = _outside_the_engine(loaded)
    assert outside == [], f"importing the engine loaded: {', '.join(outside)}"


def test_the_engine_load_check_sees_an_outsider() -> None:
    loaded = _loaded_by(["gpuci_tui.core.engine.lifecycle", "gpuci_tui.core.config.file"])
    outside = _outside_the_engine(loaded)
    assert "gpuci_tui.core.config.file" in outside


#: What reads the OS's clock or waits on it (``time.time()``, ``time.sleep(…)``…).
CLOCK_CALLS = frozenset({"time", "monotonic", "perf_counter", "sleep", "time_ns", "monotonic_ns"})


def _clock_reads(path: Path) -> list[str]:
    """Where ``path`` calls the OS's clock directly (``time.X()``, ``datetime.now()``…)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "time":
            names = {a.name for a in node.names} & CLOCK_CALLS
            found += [f"{path}:{node.lineno}: from time import {n}" for n in sorted(names)]
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner, attr = node.func.value, node.func.attr
        if isinstance(owner, ast.Name) and (
            (owner.id == "time" and attr in CLOCK_CALLS)
            or (owner.id == "datetime" and attr in ("now", "utcnow", "today"))
        ):
            found.append(f"{path}:{node.lineno}: {owner.id}.{attr}()")
    return found


def test_the_host_reads_time_only_through_its_injected_clock() -> None:
    """core/host takes the time from the ``clock`` it is given and waits through asyncio.

    A supervisor on a virtual-time loop (tests/virtual_time.py) is then driven by that
    loop alone; a direct read of the OS's clock would mix two times. Passing
    ``time.time`` as a default is fine: it is handed in, not read here.
    """
    host = Path(gpuci_tui.core.__file__).parent / "host"
    found = [hit for path in sorted(host.rglob("*.py")) for hit in _clock_reads(path)]
    assert found == [], "read the injected clock (or the loop's time) instead:\n" + "\n".join(found)
