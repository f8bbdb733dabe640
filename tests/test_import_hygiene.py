"""gpuci_tui.core must stay UI-free: importing any of its modules never loads Textual or Rich."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import gpuci_tui.core


def _core_modules() -> list[str]:
    """Every module of core, sub-packages included."""
    found = pkgutil.walk_packages(gpuci_tui.core.__path__, prefix="gpuci_tui.core.")
    return sorted(info.name for info in found)


def test_core_has_modules() -> None:
    assert "gpuci_tui.core.host.supervisor" in _core_modules()


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
