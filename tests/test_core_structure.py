"""The shape of gpuci_tui/core, checked from its source: package order, no import cycles, no reach-ins.

Core's packages are *found*, not listed: every sub-directory of core with an
``__init__.py`` is a package, and every top-level module is one of its own. Each
has a tier (`TIERS`); a module may import its own package, any package of a
lower tier, and a package of its own tier as long as the packages form no
cycle. Every import counts, deferred ones inside functions and ``TYPE_CHECKING``
ones too: an import that only a type checker runs still ties the packages.

The engine is the leaf above the base: besides the base it imports only pure
standard-library modules (nothing that talks to the outside world), so it can
be tested by tables on a fake clock. A new module dropped in ``engine/`` (or
any package) is checked without touching this file; a new package or
top-level module must be given a tier here first.

Within core the modules form a DAG, nothing reaches into another part's private
members, and nothing imports the UI, the CLI or the simulation.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

import gpuci_tui.core

CORE = Path(gpuci_tui.core.__file__).parent
PREFIX = "gpuci_tui.core."

#: The package order: lower may never import higher.
TIERS: dict[str, int] = {
    # 0, the base: values and words every part speaks.
    "models": 0, "command_types": 0, "protocols": 0, "errors": 0, "wording": 0, "formatting": 0, "wire": 0,
    "registrations": 0, "host_readings": 0,
    "gpu_readings": 0,
    "packages": 0,
    # 1, the pure engine: state + observation + time -> actions.
    "engine": 1,
    # 2, the outside systems and the configuration.
    # files: the one atomic writer (I/O, so not in the base the engine may use).
    "files": 2, "config": 2, "docker": 2, "azure": 2, "gpu": 2, "secrets": 2, "store": 2,
    # 3, the supervisor that runs the engine against them.
    "host": 3,
    # 4, what runs on top of hosts.
    "fleet": 4, "export": 4,
}  # fmt: skip
ENGINE = "engine"
#: Inside ``host`` the same rule, one level down: its sub-packages (and top-level modules)
#: have an order of their own. The base says what a supervisor is and how it reports
#: (`handle`, `reporter`); the parts around the engine (GPUs, images, observers) come
#: next; then the supervisor that runs them and the control socket that serves it; then
#: the metrics, which read both; then the one assembly, and the daemon on top.
HOST_TIERS: dict[str, int] = {
    "instance": 0, "memory": 0, "reporter": 0,
    "gpus": 1,
    "handle": 2,
    "images": 3, "observers": 3,
    "supervision": 4, "control": 4,
    "metrics": 5,
    "assemble": 6,
    "daemon": 7,
}  # fmt: skip
#: The most modules one folder of core may hold: a larger one is a wing waiting to be named.
MAX_MODULES_PER_FOLDER = 20
#: Standard-library modules that talk to the outside world (files, processes, network,
#: devices, clocks, logs) or third-party ones that do: the engine imports none of them.
OUTSIDE = frozenset(
    {
        "docker", "requests", "urllib3", "http", "urllib", "socket", "ssl", "pynvml", "sqlite3",
        "subprocess", "os", "shutil", "pathlib", "io", "tempfile", "glob", "fcntl", "keyring",
        "asyncio", "threading", "time", "platformdirs", "prometheus_client", "signal", "select",
        "selectors", "tomllib", "tomli", "tomli_w", "multiprocessing", "concurrent", "ctypes",
        "mmap", "logging",
    }
)  # fmt: skip
#: What core never imports: the console, the command line, the simulation.
OUTER = ("textual", "rich", "gpuci_tui.cli", "gpuci_tui.screens", "gpuci_tui.widgets",
         "gpuci_tui.app", "gpuci_tui.sim", "gpuci_tui.services", "gpuci_tui.demo",
         "gpuci_tui.ui_messages")  # fmt: skip


class Import(NamedTuple):
    """One imported module (absolute) and the line of the import statement."""

    line: int
    module: str


@functools.cache
def _modules() -> dict[str, ast.Module]:
    """Every module of core (recursively), by dotted name under core; packages' ``__init__``
    files by the package's name.

    Parsed once per run (about a second for core's 200-odd files): the checks only read the
    trees, and each of them parsing them again added up to a minute of the suite."""
    found = {}
    for path in sorted(CORE.rglob("*.py")):
        parts = path.relative_to(CORE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            found[".".join(parts)] = ast.parse(path.read_text(), str(path))
    return found


def _packages() -> set[str]:
    """Core's packages and top-level modules, from the files on disk.

    A package is a sub-directory with an ``__init__.py`` (or with any module at all:
    a forgotten ``__init__.py`` does not hide a directory from the order).
    """
    found = set()
    for path in CORE.rglob("*.py"):
        parts = path.relative_to(CORE).parts
        found.add(parts[0] if len(parts) > 1 else path.stem)
    return found - {"__init__"}


def _package_of(name: str) -> str:
    """The package (or top-level module) a module's dotted name under core belongs to."""
    return name.split(".")[0]


def _file_of(name: str) -> str:
    """The module's file, relative to core, for messages (``engine/exits.py``)."""
    path = name.replace(".", "/")
    return f"{path}/__init__.py" if (CORE / path).is_dir() else f"{path}.py"


def _imports_with_lines(name: str, tree: ast.Module) -> Iterator[Import]:
    """Every module ``tree`` imports, absolute (``gpuci_tui.core.x.y``, ``os.path``…), with its line.

    ``from P import n`` yields both ``P`` and ``P.n`` (``n`` may be a module). Every
    import statement counts: top level, inside functions, under ``TYPE_CHECKING``.
    """
    package = ["gpuci_tui", "core", *name.split(".")[:-1]]
    if (CORE / name.replace(".", "/") / "__init__.py").exists():
        package = ["gpuci_tui", "core", *name.split(".")]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            yield Import(node.lineno, module)
            for alias in node.names:
                yield Import(node.lineno, f"{module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(node.lineno, alias.name)


def _raw_imports(name: str, tree: ast.Module) -> set[str]:
    """Every module ``tree`` imports, absolute (see `_imports_with_lines`)."""
    return {found.module for found in _imports_with_lines(name, tree)}


def _imports(name: str, tree: ast.Module, modules: dict[str, ast.Module]) -> set[str]:
    """The core modules (keys of ``modules``) that ``tree`` imports."""
    return {
        m[len(PREFIX) :]
        for m in _raw_imports(name, tree)
        if m.startswith(PREFIX) and m[len(PREFIX) :] in modules
    }


def _package_imports(name: str, tree: ast.Module) -> list[tuple[int, str, str]]:
    """(line, imported module, its package) for each import of another core package.

    The package of ``gpuci_tui.core.X...`` is ``X``, whether or not ``X`` exists (an
    import of a package that is not there is reported by the order check). One
    entry per statement and package: ``from P import a, b`` is reported as ``P``.
    """
    own = _package_of(name)
    found: dict[tuple[int, str], str] = {}
    for line, module in _imports_with_lines(name, tree):
        if not module.startswith(PREFIX):
            continue
        target = _package_of(module[len(PREFIX) :])
        if target != own:
            known = found.get((line, target))
            found[(line, target)] = module if known is None or len(module) < len(known) else known
    return sorted((line, module, target) for (line, target), module in found.items())


def _order_offences(modules: dict[str, ast.Module], tiers: dict[str, int] = TIERS) -> list[str]:
    """Each import of a package of a higher tier, or of a package without a tier."""
    offences = set()
    for name, tree in modules.items():
        own = _package_of(name)
        for line, module, target in _package_imports(name, tree):
            if target not in tiers:
                offences.add(f"core/{_file_of(name)}:{line} -> {module} (no tier for {target!r})")
            elif own in tiers and tiers[target] > tiers[own]:
                offences.add(
                    f"core/{_file_of(name)}:{line} -> {module} "
                    f"({own}, tier {tiers[own]}, imports {target}, tier {tiers[target]})"
                )
    return sorted(offences)


def _package_graph(modules: dict[str, ast.Module]) -> dict[str, dict[str, str]]:
    """package -> {imported package: one ``file:line -> module`` that shows the edge}."""
    graph: dict[str, dict[str, str]] = {}
    for name, tree in sorted(modules.items()):
        edges = graph.setdefault(_package_of(name), {})
        for line, module, target in _package_imports(name, tree):
            edges.setdefault(target, f"core/{_file_of(name)}:{line} -> {module}")
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def _package_cycle(modules: dict[str, ast.Module]) -> str | None:
    """A cycle between packages, each hop with an import that makes it; None without one."""
    graph = _package_graph(modules)
    cycle = _cycle({package: set(edges) for package, edges in graph.items()})
    if cycle is None:
        return None
    hops = [f"{a} -> {b} ({graph[a][b]})" for a, b in zip(cycle, cycle[1:], strict=False)]
    return "; ".join(hops)


# --------------------------------------------------------------------------- the package order


def test_every_package_of_core_has_a_tier() -> None:
    """A new package (or top-level module) must be placed in the order before it is used."""
    packages = _packages()
    assert {"engine", "config", "host", "models"} <= packages
    assert sorted(packages - set(TIERS)) == [], "add these to TIERS in tests/test_core_structure.py"


def test_no_package_imports_a_package_of_a_higher_tier() -> None:
    offences = _order_offences(_modules())
    assert offences == [], "imports against the package order:\n" + "\n".join(offences)


def test_packages_import_each_other_without_cycles() -> None:
    cycle = _package_cycle(_modules())
    assert cycle is None, f"packages import each other in a circle: {cycle}"


def _engine_modules(modules: dict[str, ast.Module]) -> list[str]:
    """The engine's modules, found by where they are (every module under ``engine/``)."""
    return sorted(n for n in modules if _package_of(n) == ENGINE)


def test_the_engine_is_found_by_its_directory() -> None:
    engine = _engine_modules(_modules())
    on_disk = {
        ".".join(p.relative_to(CORE).with_suffix("").parts)
        for p in (CORE / ENGINE).rglob("*.py")
        if p.stem != "__init__"
    }
    assert {n for n in engine if "." in n} >= on_disk
    assert {
        "engine.lifecycle",
        "engine.transitions.apply",
        "engine.planning.planner",
    } <= set(engine)


def test_the_engine_imports_only_the_base_and_pure_standard_library() -> None:
    """Tier 0 and the standard library minus `OUTSIDE`: no third-party library, no I/O."""
    modules = _modules()
    base = {p for p, tier in TIERS.items() if tier == 0}
    offences: dict[tuple[str, int, str], str] = {}
    for name in _engine_modules(modules):
        for line, module in _imports_with_lines(name, modules[name]):
            top = module.split(".")[0]
            if module.startswith(PREFIX):
                bad = _package_of(module[len(PREFIX) :]) not in base | {ENGINE}
                why = "not the engine or the base"
            elif top == "gpuci_tui":
                bad, why = module not in ("gpuci_tui", "gpuci_tui.core"), "outside core"
            else:
                bad = top in OUTSIDE or top not in sys.stdlib_module_names
                why = "talks to the outside world or is not the standard library"
            known = offences.get((name, line, why))
            if bad and (known is None or len(module) < len(known)):
                offences[(name, line, why)] = module  # one per statement: ``from P import a``: P
    found = sorted(
        f"core/{_file_of(name)}:{line} -> {module} ({why})"
        for (name, line, why), module in offences.items()
    )
    assert found == [], "the engine is not a leaf:\n" + "\n".join(found)


# --------------------------------------------------------------------------- inside host


def _host_modules(modules: dict[str, ast.Module]) -> dict[str, ast.Module]:
    """The host's modules, renamed as if ``host`` were core (``host.gpus.gates`` -> ``gpus.gates``),
    with their imports of ``gpuci_tui.core.host.`` read as imports of core's: the order and
    cycle checks above then apply one level down unchanged."""
    inner: dict[str, ast.Module] = {}
    for name, tree in modules.items():
        if not name.startswith("host."):
            continue
        source = ast.unparse(tree).replace("gpuci_tui.core.host.", PREFIX)
        inner[name[len("host.") :]] = ast.parse(source)
    return inner


def _host_parts() -> set[str]:
    found = set()
    for path in (CORE / "host").rglob("*.py"):
        parts = path.relative_to(CORE / "host").parts
        found.add(parts[0] if len(parts) > 1 else path.stem)
    return found - {"__init__"}


def test_every_part_of_host_has_a_tier() -> None:
    parts = _host_parts()
    assert {"supervision", "control", "observers", "daemon"} <= parts
    assert sorted(parts - set(HOST_TIERS)) == [], "add these to HOST_TIERS"


@functools.cache
def _core_host_modules() -> dict[str, ast.Module]:
    """`_host_modules` of the real core, made once per run."""
    return _host_modules(_modules())


def test_no_part_of_host_imports_a_part_of_a_higher_tier() -> None:
    inner = _core_host_modules()
    offences = [
        o.replace("core/", "core/host/", 1)
        for o in _order_offences(inner, HOST_TIERS)
        if "(no tier for" not in o  # imports of core's other packages, checked above
    ]
    assert offences == [], "imports against host's order:\n" + "\n".join(offences)


def test_the_parts_of_host_import_each_other_without_cycles() -> None:
    inner = _core_host_modules()
    graph = _package_graph(inner)
    parts = _host_parts()
    cycle = _cycle({a: {b for b in edges if b in parts} for a, edges in graph.items()})
    assert cycle is None, f"host's parts import each other in a circle: {cycle}"


def test_no_folder_of_core_holds_more_than_twenty_modules() -> None:
    """A folder that grows past it holds several concerns: name them as sub-packages."""
    sizes = {
        str(folder.relative_to(CORE.parent)): sum(
            1 for p in folder.glob("*.py") if p.stem != "__init__"
        )
        for folder in [CORE, *(p for p in CORE.rglob("*") if p.is_dir())]
        if folder.name != "__pycache__"
    }
    over = {name: n for name, n in sizes.items() if n > MAX_MODULES_PER_FOLDER}
    assert sizes["core/host"] > 0 and sizes["core/engine"] > 0
    assert over == {}, f"folders over {MAX_MODULES_PER_FOLDER} modules: {over}"


def test_the_host_order_check_names_an_import_against_it() -> None:
    modules = _fake(
        **{
            "host.gpus.gates": "from gpuci_tui.core.host.supervision.supervisor import Supervisor\n",
            "host.supervision.supervisor": "from gpuci_tui.core.host.gpus.gates import GpuGatekeeper\n",
        }
    )
    offences = _order_offences(_host_modules(modules), HOST_TIERS)
    assert offences == [
        "core/gpus/gates.py:1 -> gpuci_tui.core.supervision.supervisor "
        "(gpus, tier 1, imports supervision, tier 4)"
    ]


# --------------------------------------------------------------------------- the checks can fail


def _fake(**sources: str) -> dict[str, ast.Module]:
    return {name: ast.parse(source) for name, source in sources.items()}


def test_the_order_check_names_the_offending_import() -> None:
    modules = _fake(
        **{
            "engine.exits": "import os\n\ndef f():\n    from gpuci_tui.core.config import loader\n",
            "engine.snapshots": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from gpuci_tui.core.gpu.accounting import JobGpuNow\n"
            ),
            "docker.agentspec": "from gpuci_tui.core.engine.lifecycle import Lane\n",
            "host.x": "from gpuci_tui.core import nowhere\n",
        }
    )
    offences = _order_offences(modules)
    assert offences == [
        "core/engine/exits.py:4 -> gpuci_tui.core.config (engine, tier 1, imports config, tier 2)",
        "core/engine/snapshots.py:3 -> gpuci_tui.core.gpu.accounting "
        "(engine, tier 1, imports gpu, tier 2)",
        "core/host/x.py:1 -> gpuci_tui.core.nowhere (no tier for 'nowhere')",
    ]


def test_the_package_cycle_check_finds_a_cycle_through_a_deferred_import() -> None:
    modules = _fake(
        **{
            "config.loader": "from gpuci_tui.core.fleet.config import FleetConfig\n",
            "fleet.config": "def f():\n    from gpuci_tui.core.config import file\n",
            "docker.runtime": "from gpuci_tui.core.config.loader import Config\n",
        }
    )
    cycle = _package_cycle(modules)
    assert cycle is not None
    assert "config -> fleet (core/" in cycle and "fleet -> config (core/" in cycle
    assert ":2 -> gpuci_tui.core.config" in cycle
    assert _package_cycle(_fake(**{"docker.runtime": "import gpuci_tui.core.config"})) is None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("import subprocess", "subprocess"),
        ("from pathlib import Path", "pathlib"),
        ("from gpuci_tui.core import elsewhere", "gpuci_tui.core.elsewhere"),
        ("def f():\n    import sqlite3", "sqlite3"),
        ("if TYPE_CHECKING:\n    from gpuci_tui.core.gpu import x", "gpuci_tui.core.gpu.x"),
    ],
)
def test_the_layer_check_sees_an_offending_import(source: str, words: str) -> None:
    found = _raw_imports("engine.planner", ast.parse(source))
    assert any(m.startswith(words) for m in found)


# --------------------------------------------------------------------------- modules


def test_core_modules_import_each_other_without_cycles() -> None:
    modules = _modules()
    graph = {name: _imports(name, tree, modules) - {name} for name, tree in modules.items()}
    assert any("." in name for name in modules) or "lifecycle" in modules
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def _private_names(modules: dict[str, ast.Module]) -> set[str]:
    """Private attributes and methods the core's own classes define."""
    names: set[str] = set()
    for tree in modules.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                names.add(node.attr)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_no_part_reaches_into_another_parts_private_members() -> None:
    """``x._y`` only on ``self``/``cls``: third-party internals (pynvml, keyring) aside."""
    modules = _modules()
    ours = _private_names(modules)
    offences = []
    for name, tree in modules.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            attr = node.attr
            if attr not in ours:
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            offences.append(f"{name}.py:{node.lineno}: .{attr}")
    assert offences == []


def test_core_never_imports_the_ui_the_cli_or_the_simulation() -> None:
    modules = _modules()
    offences = [
        f"{name}: {imported}"
        for name, tree in modules.items()
        for imported in sorted(_raw_imports(name, tree))
        if any(imported == o or imported.startswith(o + ".") for o in OUTER)
    ]
    assert offences == []
