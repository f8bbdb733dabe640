"""Drill benchmark: the drills that the tests run with short settings, run with the long ones.

A drill proves a behaviour; how long its faults, retries and start-ups last only sets how
long it waits. The tests run them short (a 2-s retry where the product waits 30 s), so the
suite stays fast; this runs the very same test functions with the product's own figures, so
what BENCHMARKS.md says holds at the real lengths too. Each drill's module names its short
settings as constants; here they are replaced before the test runs:

* the agent-update drill with a wrong package hash: ``update_retry`` 30 s (the default);
* the Entra audits: tokens of 320 s (a renewal every ~20 s) and ``role_retry`` 60 s (the
  default);
* the foreign-process GPU drill: agents with the real agent's start-up (6 s + 3 s).

Usage: python bench/bench_drills.py [-k SUBSTRING]
Needs what the drills need (Docker, the emulator image, gcc for the fake NVML). Writes
bench/results/drills.json and prints a Markdown table (drill, settings, passed, seconds).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuci_tui.sim.records import AgentStartup  # noqa: E402

#: (test node id, {module constant: the product's figure}).
LONG: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "tests/drills/test_agent_update_drills.py::"
        "test_a_package_with_a_wrong_hash_is_refused_and_no_slot_parks",
        {"UPDATE_RETRY": 30.0},
    ),
    (
        "tests/audit/test_entra_audit.py::test_tokens_expire_and_the_secret_rotates_while_jobs_run",
        {"TOKEN_LIFETIME": 320},
    ),
    (
        "tests/audit/test_entra_audit.py::"
        "test_a_principal_that_loses_the_pool_role_is_told_and_does_not_crash_loop",
        {"ROLE_RETRY": 60.0},
    ),
    (
        "tests/drills/test_gpu_drills.py::"
        "test_foreign_process_holds_the_next_job_and_its_exit_releases_within_2s",
        {"SLOW_START": AgentStartup(6.0, 3.0)},
    ),
)


class LongSettings:
    """A pytest plugin: sets the drill module's constants before its test runs."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.outcome = "not run"
        self.seconds = 0.0

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        module = item.module  # type: ignore[attr-defined]
        for name, value in self.settings.items():
            assert hasattr(module, name), f"{module.__name__} has no {name}"
            setattr(module, name, value)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds += report.duration
        if report.when == "call" or report.failed:
            self.outcome = report.outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="run only the drills whose id contains this")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for node, settings in LONG:
        if args.k not in node:
            continue
        plugin = LongSettings(settings)
        began = time.monotonic()
        pytest.main(
            [str(ROOT / node), "-q", "-s", "-p", "no:cacheprovider", "--rootdir", str(ROOT)],
            plugins=[plugin],
        )
        rows.append(
            {
                "drill": node.split("::")[-1],
                "settings": {name: repr(value) for name, value in settings.items()},
                "outcome": plugin.outcome,
                "test_seconds": round(plugin.seconds, 1),
                "wall_seconds": round(time.monotonic() - began, 1),
            }
        )
    out = ROOT / "bench" / "results" / "drills.json"
    out.write_text(json.dumps({"drills": rows}, indent=2) + "\n")
    print("\n| drill | long settings | outcome | seconds |")
    print("| --- | --- | --- | ---: |")
    for row in rows:
        settings = ", ".join(f"{k} = {v}" for k, v in row["settings"].items())
        print(f"| {row['drill']} | {settings} | {row['outcome']} | {row['test_seconds']} |")


if __name__ == "__main__":
    main()
