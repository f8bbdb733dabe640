"""Make the README screenshots from the demo: SVG (Textual) and PNG (rsvg-convert).

Runs the real console (`make_app`) on the demo environment (simulated
organisation, simulated runtime, synthetic GPUs) at a fixed size, waits until
agents are busy, and saves: the dashboard under load, the drain confirmation,
the log view, the history view and the setup wizard.

Usage: python scripts/screenshots.py [--out screenshots] [--size 120x36]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import tempfile
from pathlib import Path

from gpuci_tui.app import make_app
from gpuci_tui.demo import build_demo
from gpuci_tui.services import Services

ROOT = Path(__file__).resolve().parent.parent


async def wait_for(pred: object, timeout: float = 60.0) -> None:
    """Poll ``pred()`` every 100 ms until true."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not pred():  # type: ignore[operator]
        if loop.time() > deadline:
            raise SystemExit("timed out waiting for the demo to reach the wanted state")
        await asyncio.sleep(0.1)


async def shoot(out: Path, size: tuple[int, int]) -> list[Path]:
    env = build_demo(agents=6, jobs_per_minute=60.0, seed=7)
    # Shorter jobs than the interactive demo so every state shows up quickly.
    env.feeder.duration = (6.0, 20.0)
    services = env.services()
    written: list[Path] = []
    app = make_app(services)
    try:
        async with app.run_test(size=size) as pilot:
            await wait_for(lambda: env.supervisor is not None)
            sup = env.supervisor
            await wait_for(lambda: sum(s.state == "busy" for s in sup.snapshot().slots) >= 4)
            # Real agents take ~9 s to start: let the hot standbys come up too.
            await wait_for(lambda: sum(s.standby == "ready" for s in sup.snapshot().slots) >= 3)
            await asyncio.sleep(3)  # let the sparklines gather a few samples
            await pilot.pause()
            written.append(Path(app.save_screenshot("dashboard.svg", path=str(out))))
            await pilot.press("D")
            await pilot.pause(0.5)
            written.append(Path(app.save_screenshot("drain-confirmation.svg", path=str(out))))
            await pilot.press("n")
            await pilot.pause(0.3)
            await pilot.press("l")
            await pilot.pause(2.5)
            written.append(Path(app.save_screenshot("log-view.svg", path=str(out))))
            await pilot.press("escape")
            await pilot.pause(0.3)
            # The demo's seeded history: 'train - main' creeping up in GPU memory.
            await pilot.press("h")
            await pilot.pause(1.5)
            written.append(Path(app.save_screenshot("history.svg", path=str(out))))
            await pilot.press("escape")
            sup.request_stop()
    finally:
        env.close()
    wizard = make_app(
        Services(
            config=None,
            config_path=Path(tempfile.mkdtemp()) / "config.toml",
            gpu=env.gpu,
            runtime=env.runtime,
            token_store=env.tokens,
            azure_factory=lambda url, pat: env.api,  # type: ignore[arg-type,return-value]
        )
    )
    async with wizard.run_test(size=size) as pilot:
        await pilot.pause(0.5)
        written.append(Path(wizard.save_screenshot("wizard.svg", path=str(out))))
    return written


def keep_spaces(svg_text: str) -> str:
    """``svg_text`` with ``xml:space="preserve"`` on its root element.

    Textual writes runs of spaces as ``&#160;`` at the start of ``<text>``
    elements; without the attribute librsvg strips and collapses them
    ("gpuci-tui127.0.0.1", "online 10offline"). Browsers keep them either way.
    """
    if 'xml:space="preserve"' in svg_text:
        return svg_text
    return svg_text.replace("<svg ", '<svg xml:space="preserve" ', 1)


def to_png(svg: Path) -> Path | None:
    """Render ``svg`` with rsvg-convert (legible monospace; cairosvg misaligns columns).

    The SVG itself is first made to keep its spaces (`keep_spaces`), so the PNG
    shows what the terminal showed.
    """
    if shutil.which("rsvg-convert") is None:
        print("rsvg-convert missing (apt-get install librsvg2-bin): PNGs not made")
        return None
    svg.write_text(keep_spaces(svg.read_text(encoding="utf-8")), encoding="utf-8")
    png = svg.with_suffix(".png")
    subprocess.run(
        ["rsvg-convert", "-z", "1", "-b", "#1e1e1e", str(svg), "-o", str(png)], check=True
    )
    return png


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--size", default="120x36", help="COLSxROWS")
    args = parser.parse_args()
    cols, rows = (int(v) for v in args.size.split("x"))
    args.out.mkdir(parents=True, exist_ok=True)
    for svg in asyncio.run(shoot(args.out, (cols, rows))):
        png = to_png(svg)
        print(svg, png or "")


if __name__ == "__main__":
    main()
