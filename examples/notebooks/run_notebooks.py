#!/usr/bin/env python3
"""Execute Jupyter notebooks and write one JUnit test case per notebook.

Used by examples/notebooks.yml on a gpuci-tui GPU agent:

    python run_notebooks.py --junit results.xml --output-dir executed/ examples/notebooks

A notebook passes when every cell runs without an error. A failing notebook's
test case carries the failing cell's number, its source, what it printed and
the traceback, so the Tests tab shows why without downloading anything. The
executed notebooks (with outputs) are written to --output-dir for artifacts.

Execution needs ``nbclient`` and ``nbformat`` (and a kernel, ``ipykernel``);
turning executed notebooks into JUnit needs only the standard library, so that
part is importable and testable anywhere.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
MAX_OUTPUT_CHARS = 20_000
"""Per-notebook cap on failure text: Azure DevOps truncates huge messages anyway."""


@dataclass(frozen=True)
class NotebookResult:
    """How one notebook went."""

    name: str
    """Path relative to the search root, e.g. ``training/mnist.ipynb``."""
    seconds: float
    passed: bool
    cell: int | None = None
    """1-based number of the failing code cell (as Jupyter shows it), if any."""
    source: str = ""
    output: str = ""
    """What the failing cell printed (stdout/stderr/results) before failing."""
    error: str = ""
    """``ErrorName: message``."""
    traceback: str = ""


def _text(value: Any) -> str:
    """Notebook fields are a string or a list of lines."""
    return "".join(value) if isinstance(value, list) else str(value or "")


def _output_text(output: dict[str, Any]) -> str:
    kind = output.get("output_type")
    if kind == "stream":
        return _text(output.get("text"))
    if kind in ("execute_result", "display_data"):
        return _text(output.get("data", {}).get("text/plain", ""))
    return ""


def result_from_notebook(
    nb: dict[str, Any], name: str, seconds: float, failure: str | None = None
) -> NotebookResult:
    """Judge an executed notebook (nbformat JSON as a dict).

    Args:
        nb: The notebook after execution (errors are recorded as ``error`` outputs).
        name: The name to report.
        seconds: How long execution took.
        failure: An execution problem outside any cell's output (kernel died,
            timeout); it fails the notebook even if no cell shows an error.
    """
    code_cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    for number, cell in enumerate(code_cells, start=1):
        outputs = cell.get("outputs", [])
        errors = [o for o in outputs if o.get("output_type") == "error"]
        if not errors:
            continue
        err = errors[0]
        return NotebookResult(
            name=name,
            seconds=seconds,
            passed=False,
            cell=number,
            source=_text(cell.get("source")),
            output="".join(_output_text(o) for o in outputs),
            error=f"{err.get('ename', 'Error')}: {err.get('evalue', '')}",
            traceback=_ANSI.sub("", "\n".join(err.get("traceback", []))),
        )
    if failure:
        last = next(
            (
                (n, c)
                for n, c in reversed(list(enumerate(code_cells, start=1)))
                if c.get("execution_count")
            ),
            None,
        )
        return NotebookResult(
            name=name,
            seconds=seconds,
            passed=False,
            cell=last[0] if last else None,
            source=_text(last[1].get("source")) if last else "",
            error=failure,
        )
    return NotebookResult(name=name, seconds=seconds, passed=True)


def _failure_text(result: NotebookResult) -> str:
    parts = [
        f"Cell {result.cell} failed: {result.error}" if result.cell else result.error,
        "",
        "--- cell source ---",
        result.source.rstrip(),
    ]
    if result.output.strip():
        parts += ["", "--- cell output ---", result.output.rstrip()]
    if result.traceback.strip():
        parts += ["", "--- traceback ---", result.traceback.rstrip()]
    text = "\n".join(parts)
    if len(text) > MAX_OUTPUT_CHARS:
        text = text[: MAX_OUTPUT_CHARS // 2] + "\n[… cut …]\n" + text[-MAX_OUTPUT_CHARS // 2 :]
    return text


def junit_xml(results: Sequence[NotebookResult], suite: str = "notebooks") -> str:
    """A JUnit XML document with one ``testcase`` per notebook."""
    failures = sum(not r.passed for r in results)
    root = ET.Element("testsuites")
    ts = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(results)),
        failures=str(failures),
        errors="0",
        time=f"{sum(r.seconds for r in results):.3f}",
    )
    for result in results:
        case = ET.SubElement(
            ts, "testcase", classname=suite, name=result.name, time=f"{result.seconds:.3f}"
        )
        if not result.passed:
            where = f"cell {result.cell}: " if result.cell else ""
            failure = ET.SubElement(case, "failure", message=f"{where}{result.error}"[:1000])
            failure.text = _failure_text(result)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def find_notebooks(paths: Iterable[Path]) -> list[tuple[Path, str]]:
    """``(path, name)`` of every notebook under ``paths`` (checkpoints skipped)."""
    found: list[tuple[Path, str]] = []
    for path in paths:
        if path.is_file():
            found.append((path, path.name))
            continue
        for nb in sorted(path.rglob("*.ipynb")):
            if ".ipynb_checkpoints" not in nb.parts:
                found.append((nb, nb.relative_to(path).as_posix()))
    return found


def execute(path: Path, timeout: float, kernel: str | None) -> tuple[dict[str, Any], str | None]:
    """Run a notebook with nbclient; return the executed notebook and any failure.

    Raises:
        ImportError: nbclient/nbformat are not installed.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=kernel or nb.metadata.get("kernelspec", {}).get("name", "python3"),
        resources={"metadata": {"path": str(path.parent)}},  # cwd = the notebook's folder
    )
    failure = None
    try:
        client.execute()
    except CellExecutionError:
        pass  # recorded as an "error" output of the failing cell
    except CellTimeoutError:
        failure = f"a cell ran longer than {timeout:.0f} s (--timeout)"
    except DeadKernelError as exc:
        failure = f"the kernel died (out of memory?): {exc}"
    return json.loads(nbformat.writes(nb)), failure


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry; returns 0 when all notebooks pass, 1 when one fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, help="notebooks or folders")
    parser.add_argument("--junit", type=Path, required=True, help="JUnit XML to write")
    parser.add_argument("--output-dir", type=Path, help="where to save executed notebooks")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per cell")
    parser.add_argument("--kernel", help="kernel name (default: each notebook's own)")
    args = parser.parse_args(argv)

    notebooks = find_notebooks(args.paths)
    if not notebooks:
        print(f"no notebooks found under {', '.join(map(str, args.paths))}", file=sys.stderr)
        return 2
    results = []
    for path, name in notebooks:
        print(f"running {name} …", flush=True)
        started = time.monotonic()
        try:
            executed, failure = execute(path, args.timeout, args.kernel)
        except ImportError:
            print(
                "nbclient and nbformat are needed: pip install nbclient nbformat ipykernel",
                file=sys.stderr,
            )
            return 2
        result = result_from_notebook(executed, name, time.monotonic() - started, failure)
        results.append(result)
        print(f"  {'passed' if result.passed else 'FAILED: ' + result.error}", flush=True)
        if args.output_dir:
            out = args.output_dir / name
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(executed, indent=1), encoding="utf-8")
    args.junit.parent.mkdir(parents=True, exist_ok=True)
    args.junit.write_text(junit_xml(results), encoding="utf-8")
    failed = [r.name for r in results if not r.passed]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
