"""Every command, console key and docs/ link the README names exists.

The checkers read Markdown text, so each is shown failing on a small bad text too: a
command the parser refuses, a key no binding of that screen has, a link to no file.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest
from textual.screen import Screen

from gpuci_tui.app import GpuciApp
from gpuci_tui.cli.main import build_parser
from gpuci_tui.core.config.keys import key_name
from gpuci_tui.screens.dashboard import DashboardScreen
from gpuci_tui.screens.fleet import FleetScreen
from gpuci_tui.screens.fleet_host import HostDashboardScreen
from gpuci_tui.screens.help import EVERYWHERE
from gpuci_tui.screens.history import HistoryScreen
from gpuci_tui.screens.logs import LogScreen
from gpuci_tui.screens.stale import StaleScreen

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
_SPAN = re.compile(r"`([^`\n]+)`")
_CALL = re.compile(r"(?:^|(?<=[\s`(]))gpuci-tui((?:\s[^#;|&)]*)?)(?=$|[#;|&)])")
_PLACEHOLDER = re.compile(r"[A-Z][A-Z_.…]*")
_LINK = re.compile(r"\]\(([^)\s]+)\)")

#: The README's screen names (the key table's Screen column) and the screens they are.
SCREENS: dict[str, type[Screen[None]]] = {
    "Dashboard": DashboardScreen,
    "History": HistoryScreen,
    "Logs": LogScreen,
    "Stale": StaleScreen,
    "Fleet": FleetScreen,
    "Host": HostDashboardScreen,
}


# --------------------------------------------------------------------------- commands


def invocations(markdown: str) -> list[str]:
    """Each ``gpuci-tui …`` the text names in code (blocks and spans), comments cut off."""
    code = [line for block in _FENCE.findall(markdown) for line in block.splitlines()]
    prose = _FENCE.sub("", markdown)
    code += _SPAN.findall(prose)
    return [f"gpuci-tui{m.group(1).rstrip()}" for text in code for m in _CALL.finditer(text)]


def command_problem(call: str) -> str | None:
    """Why the CLI's own parser refuses ``call`` (None when it parses); placeholders end it."""
    words = shlex.split(call)[1:]
    for i, word in enumerate(words):
        if _PLACEHOLDER.fullmatch(word):  # `gpuci-tui COMMAND --help`: what comes before
            words = words[:i]
            break
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            build_parser().parse_args(words)
    except SystemExit as stop:
        if stop.code not in (0, None):
            return f"{call!r}: {err.getvalue().strip().splitlines()[-1]}"
    return None


def test_the_readme_names_commands() -> None:
    calls = invocations(README.read_text(encoding="utf-8"))
    assert len(calls) > 20
    for wanted in ("gpuci-tui demo", "gpuci-tui setup", "gpuci-tui status"):
        assert wanted in calls


def test_every_command_the_readme_names_parses() -> None:
    problems = [
        p for c in invocations(README.read_text(encoding="utf-8")) if (p := command_problem(c))
    ]
    assert problems == []


def test_a_command_that_does_not_exist_fails_the_check() -> None:
    text = "Run `gpuci-tui drian 0`, then\n```sh\ngpuci-tui status --jsn   # typo\n```\n"
    calls = invocations(text)
    assert calls == ["gpuci-tui status --jsn", "gpuci-tui drian 0"]
    problems = [command_problem(c) for c in calls]
    assert all(problems), problems
    assert "invalid choice: 'drian'" in (problems[1] or "")
    assert command_problem("gpuci-tui COMMAND --help") is None
    assert command_problem("gpuci-tui --config /tmp/x/config.toml agents prune --dry-run") is None


# --------------------------------------------------------------------------- console keys


def key_rows(markdown: str) -> list[tuple[str, str]]:
    """(key, screen) for each key of the README's key table (``| `d` / `D` | Dashboard |``)."""
    rows = []
    for line in markdown.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[1] not in (*SCREENS, "Everywhere"):
            continue
        named = _SPAN.findall(cells[0]) + re.findall(r"\(also `([^`]+)`\)", cells[2])
        rows += [(key, cells[1]) for key in named]
    return rows


def bound_keys(screen: type[Screen[None]]) -> set[str]:
    """The keys a screen's bindings (its own, its parents' and the App's) answer."""
    keys = set(screen._merge_bindings().key_to_bindings)
    return keys | set(GpuciApp._merge_bindings().key_to_bindings)


def key_problem(key: str, screen: str) -> str | None:
    """Why ``key`` is not bound on ``screen`` (None when it is)."""
    name = "+".join(key_name(part) if len(part) == 1 else part for part in key.split("+"))
    if key == "+":
        name = key_name(key)
    if screen == "Everywhere":
        everywhere = {k for item in EVERYWHERE for k in item.keys}
        if name in everywhere or all(name in bound_keys(s) for s in SCREENS.values()):
            return None
        return f"{key!r} is not bound on every screen"
    if name not in bound_keys(SCREENS[screen]):
        return f"{key!r} is not a key of the {screen} screen ({SCREENS[screen].__name__})"
    return None


def test_the_readme_names_console_keys() -> None:
    rows = key_rows(README.read_text(encoding="utf-8"))
    assert {screen for _, screen in rows} >= {"Dashboard", "History", "Everywhere"}
    assert len(rows) > 20


def test_every_key_the_readme_names_is_bound() -> None:
    rows = key_rows(README.read_text(encoding="utf-8"))
    assert [p for key, screen in rows if (p := key_problem(key, screen))] == []


def test_a_key_that_is_not_bound_fails_the_check() -> None:
    text = (
        "| `d` / `z` | Dashboard | drain |\n| `c` | History | clear (also `k`) |\n"
        "| `?` | Everywhere | help |\n| `F9` | Everywhere | nothing |\n"
    )
    rows = key_rows(text)
    assert rows == [
        ("d", "Dashboard"),
        ("z", "Dashboard"),
        ("c", "History"),
        ("k", "History"),
        ("?", "Everywhere"),
        ("F9", "Everywhere"),
    ]
    assert [key for key, screen in rows if key_problem(key, screen)] == ["z", "c", "k", "F9"]


# --------------------------------------------------------------------------- links


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def link_problems(markdown: str, where: Path) -> list[str]:
    """Relative links of ``markdown`` (a file in ``where``) to no file, or to no heading."""
    problems = []
    for target in _LINK.findall(markdown):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        file = (where / path).resolve() if path else None
        if file is not None and not file.exists():
            problems.append(f"{target}: no such file")
            continue
        if anchor and (file is None or file.suffix == ".md"):
            text = file.read_text(encoding="utf-8") if file else markdown
            slugs = {_slug(h) for h in re.findall(r"^#+ (.+)$", _FENCE.sub("", text), re.M)}
            if anchor not in slugs:
                problems.append(f"{target}: no heading #{anchor}")
    return problems


@pytest.mark.parametrize(
    "page", [README, *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name
)
def test_every_relative_link_resolves(page: Path) -> None:
    assert link_problems(page.read_text(encoding="utf-8"), page.parent) == []


def test_the_readme_links_every_guide() -> None:
    readme = README.read_text(encoding="utf-8")
    linked = {target for target in _LINK.findall(readme) if target.startswith("docs/")}
    guides = {f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md")}
    assert guides - linked == set()


def test_a_broken_link_fails_the_check() -> None:
    text = "[ok](docs/identity.md#keyring) [gone](docs/nope.md) [bad](docs/identity.md#nokey)"
    assert link_problems(text, ROOT) == [
        "docs/nope.md: no such file",
        "docs/identity.md#nokey: no heading #nokey",
    ]


def test_the_readme_is_a_front_door() -> None:
    """Issue 27: at most about 250 lines; the reference lives in docs/."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250
