"""Every command, console key and docs/ link the README names exists.

Commands are parsed by the CLI's own parser; keys are held to what each screen's help
lists once opened with ``?`` (the help is made from the screen's active bindings, see
tests/ui/test_help_keys.py); links must reach a file and a heading. The checkers read
Markdown text, so each is shown failing on a small bad text too.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import tomllib
from collections.abc import Mapping
from pathlib import Path

import pytest

from gpuci_tui.cli.main import build_parser
from gpuci_tui.core.config import loader
from gpuci_tui.core.config.keys import key_name
from tests.ui.test_help_keys import SCREENS as HELP_SCREENS
from tests.ui.test_help_keys import open_help

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
_SPAN = re.compile(r"`([^`\n]+)`")
_CALL = re.compile(r"(?:^|(?<=[\s`(]))gpuci-tui((?:\s[^#;|&)]*)?)(?=$|[#;|&)])")
_PLACEHOLDER = re.compile(r"[A-Z][A-Z_.…]*")
_LINK = re.compile(r"\]\(([^)\s]+)\)")

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

#: The README's screen names (the key table's Screen column) and the help test's screens,
#: each opened as an operator reaches it.
SCREENS = {
    "Dashboard": "dashboard",
    "History": "history",
    "Logs": "logs",
    "Stale": "stale",
    "Fleet": "fleet",
    "Host": "fleet-host",
}


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


def bound_name(key: str) -> str:
    """A key as the README writes it (``+``, ``/``, ``ctrl+r``) named as Textual binds it."""
    if len(key) == 1:
        return key_name(key)
    *mods, last = key.split("+")
    return "+".join([*mods, key_name(last)])


def key_problem(key: str, screen: str, told: Mapping[str, set[str]]) -> str | None:
    """Why ``key`` is not a key of ``screen`` as its help tells the keys (None when it is).

    ``told``: per screen of `SCREENS`, the keys its help lists (made from its bindings).
    """
    name = bound_name(key)
    if screen == "Everywhere":
        if all(name in keys for keys in told.values()):
            return None
        return f"{key!r} is not a key of every screen"
    if name not in told[screen]:
        return f"{key!r} is not a key of the {screen} screen (its help: {sorted(told[screen])})"
    return None


async def help_keys(screen: str) -> set[str]:
    """The keys the help of ``screen`` lists, from the bindings active on it."""
    make, opener = HELP_SCREENS[SCREENS[screen]]
    app = make()
    async with app.run_test(size=(120, 36)) as pilot:
        await opener(pilot)
        return {key for line in (await open_help(pilot)).keys for key in line.keys}


def test_the_readme_names_console_keys() -> None:
    rows = key_rows(README.read_text(encoding="utf-8"))
    assert {screen for _, screen in rows} >= {"Dashboard", "History", "Everywhere"}
    assert len(rows) > 20
    assert key_rows("| `d` / `z` | Dashboard | drain |\n| `c` | History | clear (also `k`) |") == [
        ("d", "Dashboard"),
        ("z", "Dashboard"),
        ("c", "History"),
        ("k", "History"),
    ]


async def test_every_key_the_readme_names_is_one_its_screens_help_tells() -> None:
    rows = key_rows(README.read_text(encoding="utf-8"))
    named = {screen for _, screen in rows if screen != "Everywhere"}
    told = {screen: await help_keys(screen) for screen in sorted(named)}
    assert [p for key, screen in rows if (p := key_problem(key, screen, told))] == []
    # The same check fails on keys the screens do not have (it can fail).
    bad = "| `z` | Dashboard | x |\n| `c` | History | x (also `k`) |\n| `F9` | Everywhere | x |\n"
    assert [key for key, screen in key_rows(bad) if key_problem(key, screen, told)] == [
        "z",
        "c",
        "k",
        "F9",
    ]


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


# --------------------------------------------------------------------------- TOML examples

_TOML = re.compile(r"^```toml\n(.*?)^```", re.M | re.S)


def toml_problems(markdown: str) -> list[str]:
    """Each ```toml example that is not TOML, or names a section or key the loader does not know.

    Examples are partial files, so only those two are checked (a missing required key or a
    dataset path absent from this machine is not the example's fault).
    """
    problems = []
    for block in _TOML.findall(markdown):
        try:
            tables = tomllib.loads(block)
        except tomllib.TOMLDecodeError as exc:
            problems.append(f"not TOML ({exc}):\n{block}")
            continue
        _, errors = loader._from_tables(tables)
        problems += [
            str(e) for e in errors if e.problem.startswith(("unknown", "is not an action"))
        ]
    return problems


@pytest.mark.parametrize(
    "page", [README, *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name
)
def test_every_toml_example_is_a_file_the_loader_reads(page: Path) -> None:
    assert toml_problems(page.read_text(encoding="utf-8")) == []


def test_a_wrong_toml_example_fails_the_check() -> None:
    multi_line = '```toml\n[fleet]\nhosts = [\n  { host = "a",\n    label = "b" },\n]\n```\n'
    assert "not TOML" in toml_problems(multi_line)[0]
    unknown = '```toml\n[agents]\nimagee = "x"\n\n[keys]\ndrian = "d"\n```\n'
    problems = toml_problems(unknown)
    assert len(problems) == 2 and 'did you mean "image"' in problems[0], problems
