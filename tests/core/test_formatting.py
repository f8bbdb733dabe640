"""One formatter per quantity, shared by ``gpuci-tui status``, the history and the console."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpuci_tui.core import formatting
from gpuci_tui.core.formatting import (
    ago,
    exit_label,
    gib,
    job_label,
    job_result,
    memory,
    memory_gb,
    memory_short,
    until,
)
from gpuci_tui.core.models import ExitInfo, JobInfo
from gpuci_tui.core.store.history import JobRecord

NOW = 1_000_000.0
GIB = 1024.0


@pytest.mark.parametrize(
    ("seconds", "words", "compact"),
    [
        (0.5, "just now", "just now"),
        (1.5, "just now", "1s ago"),
        (12, "12 s ago", "12s ago"),
        (600, "10 min ago", "10m00s ago"),
        (725, "12 min ago", "12m05s ago"),
        (3 * 3600, "3 h ago", "3h00m ago"),
    ],
)
def test_ago_in_words_for_the_console_and_compact_for_the_cli(
    seconds: float, words: str, compact: str
) -> None:
    assert ago(NOW - seconds, NOW) == words
    assert ago(NOW - seconds, NOW, compact=True) == compact


def test_ago_and_until_of_nothing() -> None:
    assert ago(None, NOW) == ago(None, NOW, compact=True) == "never"
    assert until(None, NOW) == ""
    assert until(NOW + 0.5, NOW) == "now"
    assert until(NOW + 11.2, NOW) == "in 12 s"
    assert until(NOW + 600, NOW) == "in 10 min"


@pytest.mark.parametrize(
    ("mib", "figure", "sized", "short", "gb"),
    [
        (512.0, "0.5", "512 MiB", "512M", "512 MB"),
        (999.4, "1.0", "999 MiB", "999M", "999 MB"),
        (1000.0, "1.0", "1000 MiB", "1.0G", "1000 MB"),
        (2 * GIB, "2.0", "2.0 GiB", "2.0G", "2.0 GB"),
        (8 * GIB - 256, "7.8", "7.8 GiB", "7.8G", "7.8 GB"),
        (58_000.0, "56.6", "56.6 GiB", "57G", "57 GB"),
        (80 * GIB, "80.0", "80.0 GiB", "80G", "80 GB"),
    ],
)
def test_gpu_memory_forms_side_by_side(
    mib: float, figure: str, sized: str, short: str, gb: str
) -> None:
    assert gib(mib) == figure
    assert memory(mib) == sized
    assert memory_short(mib) == short
    assert len(memory_short(mib)) <= 4, "the agents' job column keeps four cells for it"
    assert memory_gb(mib) == gb


def test_gpu_memory_not_known() -> None:
    assert gib(None) == "N/A"
    assert memory(None) == memory_short(None) == "-"
    assert gib(60 * GIB, 0) == "60"


@pytest.mark.parametrize(
    ("job", "width", "label"),
    [
        (None, None, "-"),
        (JobInfo(8), None, "request 8"),
        (JobInfo(8, pipeline="lint"), None, "'lint' (request 8)"),
        (JobInfo(8, pipeline="train - main", run="20261122.3"), None, "'train - main' 20261122.3"),
        (JobInfo(8, pipeline="inference-bench - main", run="20261122.1"), 26,
         "'inference-be…' 20261122.1"),
        (JobInfo(8, pipeline="train - main", run="20261122.3"), 22, "'train…' 20261122.3"),
        (JobInfo(123456789), 10, "request…"),
    ],
)  # fmt: skip
def test_job_label(job: JobInfo | None, width: int | None, label: str) -> None:
    assert job_label(job, width) == label


@pytest.mark.parametrize(
    ("text", "width", "cut"),
    [
        ("GPU 1 is held by pid 4242", 40, "GPU 1 is held by pid 4242"),
        ("GPU 1 is held by pid 4242", 25, "GPU 1 is held by pid 4242"),
        ("GPU 1 is held by pid 4242", 24, "GPU 1 is held by pid…"),
        ("GPU 1 is held by pid 4242", 16, "GPU 1 is held…"),
        ("GPU 1 is held by pid 4242", 14, "GPU 1 is held…"),  # the space after "held" is free
        # A separator left at the cut goes with the word after it.
        ("offline for 3 days, name of an old prefix", 22, "offline for 3 days…"),
        ("'train - main' 20261122.3", 10, "'train…"),
        ("reason: the container exited", 10, "reason…"),
        # One long word: cut inside it rather than keep almost nothing.
        ("gpuhost-verylongname-17", 10, "gpuhost-v…"),
        ("a verylongwordthatgoeson", 12, "a verylongw…"),
        ("abc", 1, "…"),
        ("abc", 0, ""),
        ("", 5, ""),
    ],
)
def test_cut_words_ends_on_a_whole_word(text: str, width: int, cut: str) -> None:
    assert formatting.cut_words(text, width) == cut
    assert len(cut) <= max(0, width)


def test_cut_words_keeps_every_word_it_shows_whole() -> None:
    """Over every width, each shown word is a word of the text (the last may be a long one's cut)."""
    text = "registered 3 days ago under the old prefix demo-old, never seen online since"
    words = text.split()
    for width in range(12, len(text)):
        shown = formatting.cut_words(text, width).removesuffix("…").split()
        assert shown[:-1] == words[: len(shown) - 1]
        assert shown[-1].rstrip(",") == words[len(shown) - 1].rstrip(",")


@pytest.mark.parametrize(
    ("info", "label"),
    [
        (None, "-"),
        (ExitInfo(code=None), "?"),
        (ExitInfo(code=0, reason="job finished"), "0 job finished"),
        (ExitInfo(code=137, oom=True, reason="killed by the OOM killer"),
         "137 OOM killed by the OOM killer"),
        (ExitInfo(code=143, reason="SIGTERM: stopped"), "143 SIGTERM: stopped"),
    ],
)  # fmt: skip
def test_exit_label(info: ExitInfo | None, label: str) -> None:
    assert exit_label(info) == label


def _record(**kw: Any) -> JobRecord:
    return replace(
        JobRecord("i", 0, "h-0", 1, "train", "1", 0.0, 60.0, exit_code=0, oom=False, reason=""),
        **kw,
    )


@pytest.mark.parametrize(
    ("record", "long", "short"),
    [
        (_record(result="succeeded"), "succeeded", "succeeded"),
        (_record(exit_code=3), "exit 3", "exit 3"),
        (_record(exit_code=None), "-", "-"),
        (_record(result="failed", exit_code=137, oom=True), "failed (OOM)", "OOM"),
        (_record(result="failed", xid=(79, 48)), "failed (GPU Xid 79,48)", "failed"),
    ],
)
def test_job_result_long_for_the_cli_short_for_the_console(
    record: JobRecord, long: str, short: str
) -> None:
    assert job_result(record) == long
    assert job_result(record, short=True) == short


def test_the_cli_and_the_console_take_each_formatter_from_core() -> None:
    """No second copy: the CLI's table and the panels call the same functions."""
    from gpuci_tui.cli import render
    from gpuci_tui.widgets import format as widget_format

    for name in ("ago", "job_label", "exit_label"):
        assert getattr(render, name) is getattr(formatting, name)
    for name in ("ago", "until", "truncate", "gib", "job_label", "NA"):
        assert getattr(widget_format, name) is getattr(formatting, name)
    slot_exit = ExitInfo(code=137, oom=True, reason="killed: out of memory")
    assert widget_format.exit_label(slot_exit).plain == exit_label(slot_exit)


def test_wrap_words_breaks_between_words_and_loses_nothing() -> None:
    text = "drain gpuhost-4 [asked from the console] after registry.example.com/gpuci-agent:x"
    lines = formatting.wrap_words(text, 20)
    assert all(len(line) <= 20 for line in lines)
    assert lines[:2] == ["drain gpuhost-4", "[asked from the"]
    assert "".join(lines).replace(" ", "") == text.replace(" ", ""), "a long word is split, not cut"
    assert formatting.wrap_words("", 10) == [""]
