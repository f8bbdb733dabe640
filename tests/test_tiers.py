"""The tiers hold: a test that uses a component without its marker fails, --quick leaves
marked tests out, and a serial test says why and never runs beside others.

The cases run in a pytest of their own, on a conftest that takes the suite's hooks
(tests/tiers.py) and fakes the one fixture they need: no component is used for real.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from tests.components import BY_MARKER, component_of

ROOT = Path(__file__).resolve().parents[1]

CONFTEST = """
import pytest

from tests.tiers import *  # noqa: F403


@pytest.fixture
def docker_client():
    return object()  # stands for the engine: the guard looks at the fixture's name


@pytest.fixture
def busybox_image(docker_client):
    return "busybox"
"""

CASES = """
import subprocess
import threading

import pytest


def test_unmarked_docker_fixture(docker_client):
    pass


def test_unmarked_docker_through_another_fixture(busybox_image):
    pass


@pytest.mark.docker
def test_marked_docker_fixture(busybox_image):
    pass


def test_unmarked_tmux_program():
    subprocess.run(["tmux", "-V"], capture_output=True, check=False)


def test_unmarked_program_with_the_error_swallowed():
    try:
        subprocess.run(["/usr/sbin/sshd", "-V"], capture_output=True, check=False)
    except Exception:  # what code under test does with "not installed"
        pass


def test_unmarked_program_from_a_thread():
    thread = threading.Thread(target=subprocess.run, args=(["docker-registry", "--version"],))
    thread.start()
    thread.join()


def test_unmarked_daemon_process():
    subprocess.run(["gpuci-tui", "--config", "x.toml", "run"], check=False)


@pytest.mark.tmux
def test_marked_tmux_program():
    try:
        subprocess.run(["tmux", "-V"], capture_output=True, check=False)
    except OSError:
        pass  # no tmux here: the guard let it through, which is what is checked


def test_quick_and_unmarked():
    subprocess.run(["true"], check=True)


@pytest.mark.slow
def test_slow_and_unmarked():
    pass


@pytest.mark.serial(reason="it says why")
def test_serial_with_a_reason():
    pass
"""

FAILING = {
    "test_unmarked_docker_fixture": "@pytest.mark.docker",
    "test_unmarked_docker_through_another_fixture": "@pytest.mark.docker",
    "test_unmarked_tmux_program": "@pytest.mark.tmux",
    "test_unmarked_program_with_the_error_swallowed": "@pytest.mark.sshd",
    "test_unmarked_program_from_a_thread": "@pytest.mark.registry",
    "test_unmarked_daemon_process": "@pytest.mark.daemon",
}
PASSING = {
    "test_marked_docker_fixture",
    "test_marked_tmux_program",
    "test_quick_and_unmarked",
    "test_slow_and_unmarked",
    "test_serial_with_a_reason",
}


def run_cases(
    tmp_path: Path, *args: str, cases: str = CASES, **env: str
) -> tuple[dict[str, str], str]:
    """Run ``cases`` in a pytest of their own (``env``: added to its environment);
    the outcome (with its message) of each test, and the output."""
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_cases.py").write_text(cases)
    report = tmp_path / "report.xml"
    report.unlink(missing_ok=True)
    options = ["-p", "no:cacheprovider", f"--junitxml={report}", f"--rootdir={tmp_path}"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *options, "-o", "addopts=", *args, "test_cases.py"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    outcomes: dict[str, str] = {}
    if report.exists():
        for case in ElementTree.parse(report).getroot().iter("testcase"):
            problem = case.find("failure")
            if problem is None:
                problem = case.find("error")
            outcomes[case.get("name", "")] = (
                "passed" if problem is None else f"failed: {problem.get('message', '')}"
            )
    return outcomes, done.stdout + done.stderr


def test_a_test_that_uses_a_component_without_its_marker_fails(tmp_path: Path) -> None:
    outcomes, output = run_cases(tmp_path)
    for name, marker in FAILING.items():
        assert outcomes.get(name, "").startswith("failed"), (name, outcomes.get(name), output)
        assert f"is not marked {marker}" in outcomes[name], (name, outcomes[name])
        assert "so that the quick tier leaves it out" in outcomes[name]
    for name in PASSING:
        assert outcomes.get(name) == "passed", (name, outcomes.get(name), output)


def test_quick_leaves_out_the_tests_marked_with_a_component_or_slow(tmp_path: Path) -> None:
    outcomes, output = run_cases(tmp_path, "--quick")
    assert "test_marked_docker_fixture" not in outcomes, output
    assert "test_marked_tmux_program" not in outcomes, output
    assert outcomes.get("test_quick_and_unmarked") == "passed", output
    assert "test_slow_and_unmarked" not in outcomes, output  # the full run's (PASSING)
    # An unmarked test that uses a component is in the quick tier, and fails there.
    assert outcomes.get("test_unmarked_docker_fixture", "").startswith("failed"), output


def test_a_serial_test_says_why_and_a_missing_reason_is_refused(tmp_path: Path) -> None:
    outcomes, output = run_cases(tmp_path, "-m", "serial")
    assert outcomes == {"test_serial_with_a_reason": "passed"}, output
    assert "test_cases.py::test_serial_with_a_reason: it says why" in output

    no_reason = "import pytest\n\n@pytest.mark.serial\ndef test_x():\n    pass\n"
    outcomes, output = run_cases(tmp_path, cases=no_reason)
    assert "@pytest.mark.serial needs reason=" in output, output


def test_a_serial_test_fails_instead_of_running_beside_others(tmp_path: Path) -> None:
    serial = "import pytest\n\n@pytest.mark.serial(reason='r')\ndef test_x():\n    pass\n"
    # What pytest-xdist sets in its workers (none is started here).
    outcomes, output = run_cases(tmp_path, cases=serial, PYTEST_XDIST_WORKER="gw0")
    assert outcomes["test_x"].startswith("failed"), output
    assert "a serial test must not run beside others (r)" in outcomes["test_x"]


@pytest.mark.parametrize(
    ("argv", "component"),
    [
        (["tmux", "-L", "x", "new-session"], "tmux"),
        (["/usr/sbin/sshd", "-D"], "sshd"),
        (["dbus-run-session", "--", "sh"], "keyring_real"),
        (["dockerd", "--host=unix:///tmp/d.sock"], "docker"),
        (["useradd", "gpuci1"], "root"),
        ([sys.executable, "-m", "gpuci_tui.cli.main", "--config", "c.toml", "run"], "daemon"),
        ([sys.executable, "-m", "tests.drills.gpu_daemon", "--config", "c.toml", "run"], "daemon"),
        (["/venv/bin/gpuci-tui", "run"], "daemon"),
        ([sys.executable, "-m", "gpuci_tui.cli.main", "status", "--json"], None),
        (["ruff", "run"], None),
        (["git", "status"], None),
    ],
)
def test_what_a_command_line_starts(argv: list[str], component: str | None) -> None:
    assert component_of(argv) == component
    assert component is None or component in BY_MARKER
