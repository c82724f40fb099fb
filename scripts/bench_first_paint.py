"""Presenter mode's first paint: fresh loads of presenter links, what the first frames showed.

    python scripts/bench_first_paint.py                                  # kv_cache zh, gqa en; 6 loads each
    python scripts/bench_first_paint.py --urls "masking?lang=en&present=1&step=3" -n 10
    python scripts/bench_first_paint.py --root /tmp/old                  # another checkout, same measurement

Each load is a new browser page (a new session) on one ``streamlit run`` of ``--root``. From the navigation on,
every animation frame is sampled until the page's title has been drawn for 50 frames: the time of the first frame
with the title (ms after navigation start), the smallest prose size seen in a frame with text (presenter mode's is
21.6 px, the normal layout's 16 px) and the number of frames in which the sidebar was visible. The first load of a
server compiles and imports the pages: it is reported but left out of the median.
"""
from __future__ import annotations

import argparse
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.layout_check import launch_browser  # noqa: E402
from scripts.server import start_server  # noqa: E402

SAMPLER = """window.__frames = [];
const sample = () => {
  const main = document.querySelector('.stMainBlockContainer');
  const title = document.querySelector('[data-testid=stMain] h1');
  const side = document.querySelector('[data-testid=stSidebar]');
  const box = side && side.getBoundingClientRect();
  if (main && title && title.innerText.trim()) {
    window.__frames.push({t: performance.now(), px: parseFloat(getComputedStyle(main).fontSize),
                          sidebar: !!side && side.offsetParent !== null && box.width > 0 && box.right > 0});
  }
  if (window.__frames.length < 50) requestAnimationFrame(sample);
};
sample();"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=pathlib.Path, default=ROOT)
    ap.add_argument("--urls", nargs="+", default=["kv_cache?lang=zh&present=1", "gqa?lang=en&present=1"])
    ap.add_argument("-n", type=int, default=6)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    proc = start_server(args.root)
    try:
        with sync_playwright() as p:
            browser = launch_browser(p)
            print(f"{'url':40s} {'first text ms (median)':>22s} {'min px':>7s} {'sidebar frames':>15s}  loads")
            for url in args.urls:
                loads = []
                for _ in range(args.n):
                    page = browser.new_page(viewport={"width": 1280, "height": 720})
                    page.add_init_script(SAMPLER)
                    page.goto(f"{proc.base}/{url}")
                    page.wait_for_function("window.__frames.length >= 50", timeout=60_000)
                    frames = page.evaluate("window.__frames")
                    loads.append((frames[0]["t"], min(f["px"] for f in frames), sum(f["sidebar"] for f in frames)))
                    page.close()
                rest = loads[1:] or loads
                print(f"{url:40s} {statistics.median(t for t, _, _ in rest):22.0f} "
                      f"{min(px for _, px, _ in loads):7.1f} {sum(s for _, _, s in loads):15d}  "
                      f"{[round(t) for t, _, _ in loads]}")
            browser.close()
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
