"""The suite's tiers as pytest hooks (tests/conftest.py takes them in).

- The component markers of tests/components.py, and ``serial``, are declared here
  (with ``--strict-markers``, a misspelt marker is an error, not a new tier).
- ``--quick`` keeps the tests that need no component, less those marked ``slow``.
- A test that uses a component without its marker fails (tests/components.py).
- ``@pytest.mark.serial(reason=…)``: a test that cannot share the machine. The reason
  is required, and printed by the run that runs it; under pytest-xdist such a test
  fails instead of running beside others (scripts/test.sh runs them alone, after).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from tests.components import (
    COMPONENTS,
    SERIAL,
    SLOW,
    enter,
    install_guards,
    quick,
    unmarked_fixtures,
    used_unmarked,
)

__all__ = [  # the hooks: a conftest takes them with `from tests.tiers import *`
    "pytest_addoption",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_report_collectionfinish",
    "pytest_runtest_makereport",
    "pytest_runtest_protocol",
    "pytest_runtest_setup",
    "pytest_unconfigure",
]

_uninstall: list[Callable[[], None]] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--quick",
        action="store_true",
        help="run only the quick tier: the tests that need no component (tests/components.py)",
    )


def pytest_configure(config: pytest.Config) -> None:
    for component in COMPONENTS:
        config.addinivalue_line("markers", f"{component.marker}: needs {component.needs}")
    config.addinivalue_line(
        "markers",
        f"{SERIAL}(reason): cannot share the machine with other tests; runs alone, "
        "after the parallel part (the reason is required and printed)",
    )
    config.addinivalue_line(
        "markers",
        f"{SLOW}: needs no component but takes long; the quick tier (--quick) leaves it out",
    )
    _uninstall.append(install_guards())


def pytest_unconfigure(config: pytest.Config) -> None:
    while _uninstall:
        _uninstall.pop()()


def serial_reason(item: pytest.Item) -> str | None:
    """Why ``item`` runs alone (None: it need not)."""
    mark = item.get_closest_marker(SERIAL)
    if mark is None:
        return None
    reason = mark.kwargs.get("reason") or (mark.args[0] if mark.args else "")
    if not str(reason).strip():
        raise pytest.UsageError(
            f'{item.nodeid}: @pytest.mark.serial needs reason="…": say why the test '
            "cannot share the machine"
        )
    return str(reason)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        serial_reason(item)
    if not config.getoption("--quick"):
        return
    kept = [item for item in items if quick(item)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if not quick(item)])
        items[:] = kept


def pytest_report_collectionfinish(
    config: pytest.Config, start_path: object, items: list[pytest.Item]
) -> list[str]:
    reasons = [(item.nodeid, serial_reason(item)) for item in items]
    lines = [f"  {nodeid}: {reason}" for nodeid, reason in reasons if reason]
    if not lines:
        return []
    return [f"{len(lines)} test(s) run alone (serial), because:", *lines]


def _in_xdist_worker() -> bool:
    return "PYTEST_XDIST_WORKER" in os.environ


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    problems = unmarked_fixtures(item)
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
    reason = serial_reason(item)
    if reason and _in_xdist_worker():
        pytest.fail(
            f"a serial test must not run beside others ({reason}): run it without -n "
            "(scripts/test.sh runs the serial tests alone, after the parallel part)",
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    enter(item)
    try:
        return (yield)
    finally:
        enter(None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Iterator[pytest.TestReport]:
    report: pytest.TestReport = yield
    # A use from a thread of the test's (or one the code under test swallowed) passed
    # its phase: it fails here. One raised in the phase already failed it.
    found = used_unmarked(item)
    if found and report.passed:
        report.outcome = "failed"
        report.longrepr = "\n".join(dict.fromkeys(found))
    return report
