"""The shape of gpuci_tui/core, checked from its source: layers, no import cycles, no reach-ins.

Every part of the engine talks to the others through their public names, and
the modules form a DAG (deferred imports inside functions are counted too:
a cycle hidden in a function is still a cycle). Core is walked recursively,
so the checks hold before and after its modules move into sub-packages
(engine/, host/, ...): a module is named by its dotted path under core
(``lifecycle`` flat, ``engine.lifecycle`` moved).

Layers: the pure engine imports nothing that talks to the outside world, and
nothing in core imports the UI, the CLI or the simulation.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import gpuci_tui.core

CORE = Path(gpuci_tui.core.__file__).parent

#: The pure engine's modules, by file stem (flat, or under core/engine/ once moved).
ENGINE = frozenset(
    {
        "lifecycle", "planner", "planner_run", "transitions", "transitions_server",
        "commands", "preview", "snapshots", "steps", "exits", "planner_hold",
        "transitions_gpu", "gpu_admission", "gpu_health",
    }
)  # fmt: skip
#: Libraries that talk to the outside world (files, processes, network, devices, clocks).
OUTSIDE = frozenset(
    {
        "docker", "requests", "urllib3", "http", "urllib", "socket", "ssl", "pynvml", "sqlite3",
        "subprocess", "os", "shutil", "pathlib", "io", "tempfile", "glob", "fcntl", "keyring",
        "asyncio", "threading", "time", "platformdirs", "prometheus_client", "signal", "select",
    }
)  # fmt: skip
#: Core modules that do I/O (by stem, old flat names and the names they get once moved):
#: the engine must not import them.
IO_MODULES = frozenset(
    {
        "azure", "azure_http", "http", "client", "runtime", "runtime_client", "runtime_events",
        "events", "history", "history_schema", "schema", "gpu", "nvml_sampler", "gpu_watch",
        "secrets", "token_store", "paths", "cgroups", "control", "daemon", "supervisor",
        "group_supervisor", "executor", "pool_observer", "container_observer", "fleet_link",
        "link", "ssh_handle", "ssh_command", "metrics", "metrics_server", "job_recorder",
        "assemble", "redaction", "files",
    }
)  # fmt: skip
#: What core never imports: the console, the command line, the simulation.
OUTER = ("textual", "rich", "gpuci_tui.cli", "gpuci_tui.screens", "gpuci_tui.widgets",
         "gpuci_tui.app", "gpuci_tui.sim", "gpuci_tui.services", "gpuci_tui.demo",
         "gpuci_tui.ui_messages")  # fmt: skip


def _modules() -> dict[str, ast.Module]:
    """Every module of core (recursively), by dotted name under core; packages' ``__init__``
    files by the package's name."""
    found = {}
    for path in sorted(CORE.rglob("*.py")):
        parts = path.relative_to(CORE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            found[".".join(parts)] = ast.parse(path.read_text(), str(path))
    return found


def _raw_imports(name: str, tree: ast.Module) -> set[str]:
    """Every module ``tree`` imports, absolute (``gpuci_tui.core.x.y``, ``os.path``…).

    ``from P import n`` yields both ``P`` and ``P.n`` (``n`` may be a module).
    """
    package = ["gpuci_tui", "core", *name.split(".")[:-1]]
    if (CORE / name.replace(".", "/") / "__init__.py").exists():
        package = ["gpuci_tui", "core", *name.split(".")]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _imports(name: str, tree: ast.Module, modules: dict[str, ast.Module]) -> set[str]:
    """The core modules (keys of ``modules``) that ``tree`` imports."""
    prefix = "gpuci_tui.core."
    return {
        m[len(prefix) :]
        for m in _raw_imports(name, tree)
        if m.startswith(prefix) and m[len(prefix) :] in modules
    }


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


def test_core_modules_import_each_other_without_cycles() -> None:
    modules = _modules()
    graph = {name: _imports(name, tree, modules) - {name} for name, tree in modules.items()}
    assert any("." in name for name in modules) or "lifecycle" in modules
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


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


def _engine(modules: dict[str, ast.Module]) -> list[str]:
    return [
        n for n in modules if n.rsplit(".", 1)[-1] in ENGINE and n.split(".")[0] in ("engine", n)
    ]


def test_the_engine_is_found_in_either_layout() -> None:
    assert sorted(n.rsplit(".", 1)[-1] for n in _engine(_modules())) == sorted(ENGINE)


def test_the_engine_imports_nothing_that_talks_to_the_outside_world() -> None:
    modules = _modules()
    offences = []
    for name in _engine(modules):
        for imported in sorted(_raw_imports(name, modules[name])):
            top = imported.split(".")[0]
            if top in OUTSIDE:
                offences.append(f"{name}: {imported}")
            inner = imported.removeprefix("gpuci_tui.core.")
            io_module = inner in modules and inner.rsplit(".", 1)[-1] in IO_MODULES
            if imported.startswith("gpuci_tui.core.") and io_module:
                offences.append(f"{name}: {imported}")
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


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("import subprocess", "subprocess"),
        ("from pathlib import Path", "pathlib"),
        ("from gpuci_tui.core import elsewhere", "gpuci_tui.core.elsewhere"),
    ],
)
def test_the_layer_check_sees_an_offending_import(source: str, words: str) -> None:
    found = _raw_imports("engine.planner", ast.parse(source))
    assert any(m.startswith(words) for m in found)
