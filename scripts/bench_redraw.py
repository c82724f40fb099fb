"""Browser redraw time of every page after a control change to a never-used value (budget 300 ms, docs/performance.md).

    python scripts/bench_redraw.py                            # every page of this checkout, median of 4
    python scripts/bench_redraw.py --root /tmp/old --pages encoder qkv -n 6 --json redraw.json

What is measured, in headless Chromium (1280x720) against a real ``streamlit run`` of ``--root``:

1. The page is opened (``?lang=en``) and left until idle: script state ``notRunning``, no skeleton, every visible
   Vega chart drawn (twice, 300 ms apart), then 500 ms more.
2. The control (main area or sidebar): the number input whose label says "seed" (else the first number input)
   is stepped with its "+" button (ArrowUp in the input when it is too narrow to show the button); a page with
   neither gets its first slider moved one step with the arrow key (right, or left when there is no room); a page
   with only a text input (alignment's date) gets a new date typed and Enter pressed (the clock starts at Enter). Each
   press is a value never used in this server's life, so no cache answers it. One press warms up (reported as
   ``first_ms``, not in the median), then ``-n`` presses are timed.
3. Start: the ``click`` event of the press (a capturing listener, ``performance.now()`` in the page).
   End: the animation frame after the last of (a) a DOM mutation inside any ``stVegaLiteChart`` (the SVG a
   vega-embed view writes when it re-renders, or a chart element added/replaced; a chart drawn to a canvas: the
   last ``restore()`` of its 2-D context) and (b) the app's
   ``data-test-script-state`` returning to ``notRunning``; "last" means nothing of either kind for 600 ms after it
   (the quiet window is not counted). Charts whose data did not change are not re-rendered by Streamlit and so do
   not count; ``charts_redrawn`` says how many of ``charts`` did.
4. Payload: messages ("msgs": one per element re-sent, plus the run's start and end; every element the browser
   receives is re-rendered, about 1-5 ms each, so a control inside an ``st.fragment`` redraws only the fragment)
   and bytes of websocket frames the browser received from the server from the click to the end of the quiet
   window (the rerun's deltas, chart specs and data), per press, median.

The bare floor (``scripts/floor/bare_floor_app.py`` or ``--floor PATH``: one 12x12 heatmap with numbers,
three bar charts) is measured the same way in the same run, and each page's median is reported as a ratio to it.
Run on an idle machine if you can: figures on a loaded 2-core box are noisy (the load average is printed).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time

TOOL_ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(TOOL_ROOT) not in sys.path:
    sys.path.insert(0, str(TOOL_ROOT))

from scripts.layout_check import launch_browser, page_keys, page_url, wait_idle  # noqa: E402
from scripts.server import start_server  # noqa: E402

BUDGET_MS = 300
FLOOR = pathlib.Path(__file__).resolve().parent / "floor" / "bare_floor_app.py"
QUIET_MS = 600
# the values typed into a text input (a page whose only control is text, e.g. alignment's date): new dates
TEXT_VALUES = [f"{m} {d}, {y}" for m, d, y in zip(["June", "March", "October", "July", "May", "August", "April",
                                                   "November", "February", "September"], range(3, 30, 2),
                                                  range(2011, 2031, 2))]

# Installed before any page script: marks the press, every chart mutation (and its next frame) and every script run.
PROBE_JS = """(() => {
  const h = window.__redraw = {t0: 0, lastChart: 0, lastFrame: 0, runStart: 0, runEnd: 0, runEndFrame: 0,
                               lastMsg: 0, lastMut: 0, lastMutFrame: 0, charts: new Set()};
  // every message from the server is time-stamped: a quick fragment rerun may never show the "running" state
  // (React renders running and not-running in one go), and then its end is the last DOM change after the last message
  const WS = window.WebSocket;
  window.WebSocket = function (...args) {
    const ws = new WS(...args);
    ws.addEventListener('message', () => { if (h.t0) h.lastMsg = performance.now(); });
    return ws;
  };
  window.WebSocket.prototype = WS.prototype;
  Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
  const chartOf = n => n && n.nodeType === 1 ? n.closest('[data-testid=stVegaLiteChart]')
                                             : (n && n.parentElement ? n.parentElement.closest('[data-testid=stVegaLiteChart]') : null);
  // a chart drawn to a canvas (Vega's canvas renderer: Streamlit picks it for charts of more than 2,000 marks)
  // changes no DOM when it redraws: its redraw is the last context restore() of a canvas inside a chart
  const restore = CanvasRenderingContext2D.prototype.restore;
  CanvasRenderingContext2D.prototype.restore = function (...args) {
    const out = restore.apply(this, args);
    const c = h.t0 ? chartOf(this.canvas) : null;
    if (c) { h.charts.add(c); h.lastChart = performance.now();
      requestAnimationFrame(() => { h.lastFrame = performance.now(); }); }
    return out;
  };
  document.addEventListener('click', () => { h.t0 = performance.now(); }, true);
  document.addEventListener('keydown', () => { h.t0 = performance.now(); }, true);
  new MutationObserver(muts => {
    const now = performance.now();
    let chart = false;
    for (const m of muts) {
      if (m.type === 'attributes' && m.attributeName === 'data-test-script-state'
          && m.target.getAttribute('data-testid') === 'stApp') {
        // oldValue, not the attribute now: a fragment rerun can flip it to running and back within one batch
        if (m.oldValue !== 'running') h.runStart = now;
        else if (h.t0 && h.runStart >= h.t0) { h.runEnd = now;
          requestAnimationFrame(() => { h.runEndFrame = performance.now(); }); }
        continue;
      }
      let c = chartOf(m.target);
      if (!c) for (const a of m.addedNodes || []) { c = a.nodeType === 1 && (a.matches('[data-testid=stVegaLiteChart]')
            ? a : a.querySelector('[data-testid=stVegaLiteChart]')); if (c) break; }
      if (c) { chart = true; h.charts.add(c); }
    }
    if (chart && h.t0) { h.lastChart = now; requestAnimationFrame(() => { h.lastFrame = performance.now(); }); }
    if (h.t0 && h.lastMsg > h.t0 && now >= h.lastMsg) {
      h.lastMut = now; requestAnimationFrame(() => { h.lastMutFrame = performance.now(); }); }
  }).observe(document, {subtree: true, childList: true, attributes: true, attributeOldValue: true,
                         characterData: true});
})();"""

RESET_JS = """() => { const h = window.__redraw; h.t0 = 0; h.lastChart = 0; h.lastFrame = 0; h.runEnd = 0;
  h.runEndFrame = 0; h.lastMsg = 0; h.lastMut = 0; h.lastMutFrame = 0; h.charts = new Set(); }"""
# The run's end: the script state back to notRunning; or, when no "running" state was ever shown after the press,
# the last DOM change after the last server message (and its frame), with no message or change for QUIET_MS.
END_JS = """const seen = h.runEnd > h.t0 && h.runEndFrame > 0;
  const quick = !seen && h.runStart < h.t0 && h.lastMsg > h.t0 && h.lastMut >= h.lastMsg && h.lastMutFrame >= h.lastMut;
  const end = seen ? h.runEnd : (quick ? h.lastMut : 0), endFrame = seen ? h.runEndFrame : h.lastMutFrame;"""
DONE_JS = f"""() => {{ const h = window.__redraw, now = performance.now();
  {END_JS}
  return h.t0 > 0 && end > 0 && (h.lastChart === 0 || h.lastFrame > 0)
         && now - Math.max(end, h.lastChart, h.lastMsg) > {QUIET_MS}; }}"""
RESULT_JS = """() => { const h = window.__redraw;
  """ + END_JS + """
  const live = [...h.charts].filter(c => c.isConnected).length;
  return {ms: Math.max(endFrame, h.lastFrame) - h.t0, script_end_ms: end - h.t0,
          charts_redrawn: live,
          charts: document.querySelectorAll('[data-testid=stVegaLiteChart]').length}; }"""

# The control to change: {kind, index, label}, or null.
FIND_JS = r"""() => {
  const main = document.querySelector('[data-testid=stApp]');       // main area and sidebar
  const nums = [...main.querySelectorAll('[data-testid=stNumberInput]')].filter(e => e.getBoundingClientRect().width > 0);
  const label = e => (e.querySelector('label') || e).innerText.trim().split('\n')[0];
  const up = e => e.querySelector('[data-testid=stNumberInputStepUp]');
  // the "+" button, or (a narrow input hides its buttons) the input itself and ArrowUp
  const free = e => { const b = up(e); return b && b.getBoundingClientRect().width > 0 ? !b.disabled : true; };
  let i = nums.findIndex(e => /seed|种子/i.test(label(e)) && free(e));
  if (i < 0) i = nums.findIndex(free);
  if (i >= 0) { const b = up(nums[i]);
    return {kind: 'number', index: i, label: label(nums[i]), button: !!b && b.getBoundingClientRect().width > 0}; }
  const sliders = [...main.querySelectorAll('[data-testid=stSlider]')].filter(e => e.getBoundingClientRect().width > 0);
  for (let j = 0; j < sliders.length; j++) {
    // Streamlit 1.67: a react-aria slider, its thumb a visually hidden <input type=range> (value = option index)
    const th = sliders[j].querySelector('input[type=range], [role=slider]'); if (!th) continue;
    const num = (a, b) => +(th.getAttribute(a) ?? th.getAttribute(b));
    const v = num('aria-valuenow', 'value'), lo = num('aria-valuemin', 'min'), hi = num('aria-valuemax', 'max');
    return {kind: 'slider', index: j, label: label(sliders[j]), value: v, min: lo, max: hi};
  }
  const texts = [...main.querySelectorAll('[data-testid=stTextInput]')].filter(e => e.getBoundingClientRect().width > 0);
  if (texts.length) return {kind: 'text', index: 0, label: label(texts[0])};
  return null;
}"""


def _median(xs):
    return round(statistics.median(xs), 1) if xs else None


def measure_page(browser, url: str, n: int, title: bool = True) -> dict:
    ctx = browser.new_context(viewport={"width": 1280, "height": 720})
    ctx.add_init_script(PROBE_JS)
    page = ctx.new_page()
    received = [0, 0]     # bytes, frames (a frame is one message: an element's delta, the run's start or end...)
    page.on("websocket", lambda ws: ws.on(
        "framereceived", lambda payload: received.__setitem__(slice(0, 2), [received[0] + len(payload), received[1] + 1])))
    out: dict = {"url": url}
    try:
        t_load = time.perf_counter()
        page.goto(url)
        wait_idle(page, title=title)
        page.wait_for_timeout(500)
        out["load_s"] = round(time.perf_counter() - t_load, 2)
        out["load_bytes"] = received[0]
        ctl = page.evaluate(FIND_JS)
        if ctl is None:
            out["error"] = "no number input, slider or text input to change"
            return out
        out["control"] = f"{ctl['kind']} “{ctl['label']}”"
        main = page.locator("[data-testid=stApp]")
        if ctl["kind"] == "number":
            target = main.locator("[data-testid=stNumberInput]").nth(ctl["index"])
            button = target.locator("[data-testid=stNumberInputStepUp]")
            box = target.locator("input")
            value = lambda: box.input_value()  # noqa: E731
            if ctl["button"]:
                press = lambda: button.click()  # noqa: E731
            else:
                out["control"] += " (ArrowUp: no + button at this width)"
                press = lambda: box.press("ArrowUp")  # noqa: E731
        elif ctl["kind"] == "slider":
            target = main.locator("[data-testid=stSlider]").nth(ctl["index"])
            thumb = target.locator("input[type=range], [role=slider]").first
            room_right = ctl["max"] - ctl["value"]
            key = "ArrowRight" if room_right >= (ctl["max"] - ctl["min"]) / 2 else "ArrowLeft"
            value = lambda: thumb.get_attribute("aria-valuenow") or thumb.input_value()  # noqa: E731
            if ctl["max"] - ctl["min"] < n + 1:    # too few values for n + 1 new ones: go back and forth
                out["control"] += f" ({ctl['max'] - ctl['min'] + 1} values: some presses reuse a value)"
            thumb.focus()

            def press():
                nonlocal key
                at = float(thumb.input_value())
                if (key == "ArrowRight" and at >= ctl["max"]) or (key == "ArrowLeft" and at <= ctl["min"]):
                    key = "ArrowLeft" if key == "ArrowRight" else "ArrowRight"
                thumb.press(key)
        elif ctl["kind"] == "text":
            box = main.locator("[data-testid=stTextInput]").nth(ctl["index"]).locator("input")
            value = lambda: box.input_value()  # noqa: E731
            fresh = iter(TEXT_VALUES)

            def press():
                box.fill(next(fresh))       # no key events: the clock starts at Enter's keydown
                box.press("Enter")
        times, scripts, redrawn, payloads, frames = [], [], [], [], []
        for i in range(n + 1):
            wait_idle(page, title=title)
            page.wait_for_timeout(300)
            page.evaluate(RESET_JS)
            before = value()
            received[0] = received[1] = 0
            press()
            page.wait_for_function(DONE_JS, timeout=120_000, polling=50)
            r = page.evaluate(RESULT_JS)
            if value() == before:
                out["error"] = f"the control did not change (stuck at {before})"
                break
            if i == 0:
                out["first_ms"], out["first_bytes"] = round(r["ms"], 1), received[0]
                continue
            times.append(r["ms"])
            scripts.append(r["script_end_ms"])
            redrawn.append(r["charts_redrawn"])
            payloads.append(received[0])
            frames.append(received[1])
            out["charts"] = r["charts"]
        out.update(median_ms=_median(times), runs_ms=[round(t, 1) for t in times],
                   script_end_ms=_median(scripts), charts_redrawn=max(redrawn) if redrawn else None,
                   bytes_per_rerun=int(statistics.median(payloads)) if payloads else None,
                   messages_per_rerun=int(statistics.median(frames)) if frames else None)
        exc = page.locator("[data-testid=stException]").all_inner_texts()
        if exc:
            out["error"] = "exception on the page: " + exc[0][:200]
    except Exception as e:  # noqa: BLE001 - reported per page, the run goes on
        out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    finally:
        ctx.close()
    return out


def bench_root(browser, root: pathlib.Path, keys: list[str], n: int, log=print) -> dict[str, dict]:
    proc = start_server(root)
    res = {}
    try:
        for key in keys:
            r = measure_page(browser, page_url(proc.base, key, "en"), n)
            res[key] = r
            log(f"  {key:16s} {r.get('median_ms')} ms  {r.get('runs_ms')}  {r.get('error', '')}")
    finally:
        proc.terminate()
        proc.wait(10)
    return res


def bench_floor(browser, floor: pathlib.Path, n: int, log=print) -> dict:
    with tempfile.TemporaryDirectory() as d:          # start_server runs <root>/app.py: the floor becomes one
        shutil.copy(floor, pathlib.Path(d) / "app.py")
        proc = start_server(pathlib.Path(d))
        try:
            r = measure_page(browser, proc.base + "/", n, title=False)
        finally:
            proc.terminate()
            proc.wait(10)
    log(f"  {'(floor)':16s} {r.get('median_ms')} ms  {r.get('runs_ms')}  {r.get('error', '')}")
    return r


def table(floor: dict, pages: dict[str, dict]) -> str:
    f = floor.get("median_ms")
    rows = [f"{'page':16s} {'median ms':>9s} {'x floor':>7s} {'first ms':>8s} {'script ms':>9s} "
            f"{'charts':>7s} {'KB/rerun':>8s} {'msgs':>5s} {'KB load':>8s}  control / runs"]

    def row(name, r):
        m = r.get("median_ms")
        ratio = f"{m / f:.2f}" if m and f else "-"
        flag = " !" if m and m > BUDGET_MS else ""
        ch = f"{r.get('charts_redrawn')}/{r.get('charts')}" if r.get("charts") is not None else "-"
        kb = f"{r['bytes_per_rerun'] / 1024:.1f}" if r.get("bytes_per_rerun") is not None else "-"
        kl = f"{r['load_bytes'] / 1024:.0f}" if r.get("load_bytes") is not None else "-"
        return (f"{name:16s} {str(m) + flag:>9s} {ratio:>7s} {str(r.get('first_ms', '-')):>8s} "
                f"{str(r.get('script_end_ms', '-')):>9s} {ch:>7s} {kb:>8s} {str(r.get('messages_per_rerun', '-')):>5s} {kl:>8s}  "
                f"{r.get('control', '')} {r.get('runs_ms', '')} {r.get('error', '')}")
    rows.append(row("(bare floor)", floor))
    rows += [row(k, r) for k, r in pages.items()]
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=pathlib.Path, default=TOOL_ROOT, help="checkout of the app to measure")
    ap.add_argument("--pages", nargs="*", help="page keys (default: every registered page)")
    ap.add_argument("-n", type=int, default=4, help="timed changes per page (after one warm-up)")
    ap.add_argument("--floor", type=pathlib.Path, default=FLOOR, help="the bare floor app")
    ap.add_argument("--json", type=pathlib.Path, help="write the figures here")
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright
    root = a.root.resolve()
    keys = a.pages or page_keys(root)
    t0 = time.perf_counter()
    print(f"load average before: {os.getloadavg()}")
    with sync_playwright() as p:
        browser = launch_browser(p)
        floor = bench_floor(browser, a.floor, a.n) if a.floor.exists() else {"error": f"no {a.floor}"}
        pages = bench_root(browser, root, keys, a.n)
        browser.close()
    print(f"load average after: {os.getloadavg()}; {time.perf_counter() - t0:.0f} s\n")
    print(table(floor, pages))
    over = [k for k, r in pages.items() if (r.get("median_ms") or 0) > BUDGET_MS]
    print(f"\nover {BUDGET_MS} ms: {over or 'none'}")
    if a.json:
        a.json.write_text(json.dumps({"floor": floor, "pages": pages, "budget_ms": BUDGET_MS, "n": a.n,
                                      "loadavg_end": os.getloadavg()}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
