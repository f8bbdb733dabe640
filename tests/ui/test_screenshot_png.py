"""The README screenshots' PNGs keep every space the terminal showed.

librsvg collapses and strips runs of spaces in SVG text unless told to keep
them; the screenshots then read "gpuci-tui127.0.0.1". The test renders a
Rich/Textual SVG through the script's converter and measures where the glyphs
land in the PNG.
"""

from __future__ import annotations

import io
import shutil
import struct
import zlib
from pathlib import Path
from types import ModuleType

import pytest
from rich.console import Console
from rich.text import Text

from tests.scripts_loader import load_script

CELL = 12.2
"""Pixels per terminal cell in Rich's SVG (font size 20, char width 0.61)."""


def _script() -> ModuleType:
    return load_script("screenshots")


def ink_columns(png: Path) -> list[int]:
    """The x of every pixel column with a light glyph pixel (the background is dark)."""
    data = png.read_bytes()
    pos, idat, width, height, bpp = 8, b"", 0, 0, 3
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, chunk = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, _, colour = struct.unpack(">IIBB", chunk[:10])
            bpp = {2: 3, 6: 4}[colour]
        elif kind == b"IDAT":
            idat += chunk
    raw, stride = zlib.decompress(idat), width * bpp
    rows: list[bytearray] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind_of_filter, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if kind_of_filter == 1:
                line[x] = (line[x] + a) & 255
            elif kind_of_filter == 2:
                line[x] = (line[x] + b) & 255
            elif kind_of_filter == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif kind_of_filter == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    # Only the terminal body (under the title bar's buttons) and only bright (text) pixels.
    body = rows[height // 2 :]
    return [x for x in range(width) if any(row[x * bpp + 1] > 180 for row in body)]


def test_the_png_converter_keeps_runs_of_spaces(tmp_path: Path) -> None:
    if shutil.which("rsvg-convert") is None:
        pytest.fail("rsvg-convert is missing: scripts/test.sh installs librsvg2-bin")
    console = Console(record=True, width=12, file=io.StringIO(), color_system="truecolor")
    # "a" then "  b" in another style: Textual's SVG starts the second <text> with spaces.
    console.print(Text.assemble(("a", "bold white"), ("  b", "white")), end="")
    svg = tmp_path / "spaces.svg"
    svg.write_text(console.export_svg(title=""), encoding="utf-8")
    png = _script().to_png(svg)
    assert png is not None and png.exists()
    ink = ink_columns(png)
    glyphs = [x for i, x in enumerate(ink) if i == 0 or x - ink[i - 1] > 2]
    assert len(glyphs) >= 2, ink
    gap = (glyphs[-1] - glyphs[0]) / CELL
    assert 2.5 < gap < 3.5, f"'b' should be three cells after 'a', it is {gap:.1f}"
