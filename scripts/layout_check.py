"""Is every chart legible at 1280x720 (projector) and 390x844 (phone)? Checked in headless Chromium.

    python scripts/layout_check.py                      # every page, en, both sizes, this checkout
    python scripts/layout_check.py --root /tmp/old --lang en zh --pages qkv encoder --json out.json --shots shots/

Each page is opened on a fresh server of ``--root``; every expander is opened and every tab visited (nested tabs
too), and each Vega chart that is visible is read from its SVG (the app's charts render to SVG). A problem is one of:

- ``clipped``: a text mark (axis label or title, legend label or title, chart title, a number in a cell) whose box
  reaches more than 1 px outside the chart's own SVG box, or outside an ancestor that clips (overflow not visible).
- ``truncated``: Vega cut the text to its ``labelLimit`` and ended it with "…" (the learner cannot read it).
- ``overlap``: two visible text marks of the same chart overlap by more than 1 px in both directions. Boxes are the
  text's own box in its rotated frame (getBBox through getScreenCTM, so rotated axis labels are compared as rotated
  rectangles, separating-axis test) with the height cut to the font size (the em box: Chromium's box adds line gap).
- ``dropped-quoted``: Vega hid an axis/legend label for overlap (``labelOverlap``: opacity 0) and the page's text
  (outside charts) quotes that label as a word (a Chinese label: as a substring); purely numeric labels are not
  matched (too many false hits).
  Hidden labels that nobody quotes are counted per chart (``dropped`` in the chart record), not flagged.
- ``h-scroll``: at 390 px, the page or the main area scrolls sideways, or an element inside the main area
  (a formula, a tab bar, a table) has content wider than itself and scrolls sideways; code blocks (``stCode``)
  are exempt: code wraps worse than it scrolls.

Findings are exact: page, viewport, language, tab path, chart index on the page (in document order), the chart's
title (else its axis titles), the text, and the kind. ``tests/test_layout.py`` runs the same check.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from urllib.parse import urlparse

TOOL_ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(TOOL_ROOT) not in sys.path:
    sys.path.insert(0, str(TOOL_ROOT))

from scripts.server import start_server, stop_server  # noqa: E402

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
VIEWPORTS = {"1280x720": (1280, 720), "390x844": (390, 844)}


# ----------------------------------------------------------------------------------------------- shared helpers
def page_keys(root: pathlib.Path) -> list[str]:
    """The registered pages of the checkout at ``root`` (its own ui/registry.py, so an old checkout works)."""
    spec = importlib.util.spec_from_file_location("_registry_under_test", root / "ui" / "registry.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod            # dataclasses look their module up while the class is created
    spec.loader.exec_module(mod)
    return [p.key for p in mod.PAGES if (root / "app_pages" / f"{p.key}.py").exists()]


def page_url(base: str, key: str, lang: str) -> str:
    return f"{base}/{'' if key == 'home' else key}?lang={lang}"


def launch_browser(playwright):
    exe = shutil.which("chromium")
    if exe is None:
        raise RuntimeError("no chromium on this machine: apt-get install -y chromium")
    return playwright.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)


# True once the script is idle, no skeleton is left and every visible chart has drawn its SVG.
IDLE_JS = """(needTitle = true) => {
  const app = document.querySelector('[data-testid=stApp]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (document.querySelector('[data-testid=stMain] [data-testid=stException]')) return true;   // crashed: report it
  if (needTitle && !document.querySelector('[data-testid=stMain] h1')) return false;
  if (document.querySelector('[data-testid=stSkeleton]')) return false;
  // an expander opens by animating its height for half a second, clipping its content meanwhile
  for (const d of document.querySelectorAll('[data-testid=stMain] details'))
    if (d.getAnimations({subtree: true}).some(a => a.playState === 'running')) return false;
  for (const c of document.querySelectorAll('[data-testid=stVegaLiteChart]')) {
    const r = c.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;            // in a closed tab or expander
    const g = c.querySelector('svg.marks, canvas.marks');
    if (!g || g.getBoundingClientRect().width === 0) return false;
  }
  return true;
}"""


def wait_idle(page, timeout_ms: int = 90_000, settle_ms: int = 300, title: bool = True) -> None:
    """Until the script is idle, no skeleton is left and every visible chart is drawn (and the page's title is
    shown, unless ``title`` is False), twice ``settle_ms`` apart."""
    page.wait_for_function(IDLE_JS, arg=title, timeout=timeout_ms, polling=50)
    page.wait_for_timeout(settle_ms)
    page.wait_for_function(IDLE_JS, arg=title, timeout=timeout_ms, polling=50)


# Counts the script runs the page has started (the app's state turning to "running"). A click that starts a run
# starts it 60-180 ms later, so right after the click the page still looks idle; with the count, a test waits for
# that run to end instead of sleeping long enough for it to start (``click_and_wait``).
RUNS_JS = """if (window.__runs === undefined) { window.__runs = 0;
new MutationObserver(ms => { for (const m of ms)
    if (m.target.getAttribute('data-test-script-state') === 'running') window.__runs++; })
  .observe(document, {subtree: true, attributes: true, attributeFilter: ['data-test-script-state']}); }"""


def watch_runs(target) -> None:
    """Count the script runs of every page later opened in ``target`` (a Playwright page or context); watching a
    page twice counts each run once."""
    target.add_init_script(RUNS_JS)


def click_and_wait(page, locator, *, start_ms: int = 400, settle_ms: int = 100, title: bool = True) -> None:
    """Click ``locator`` (on a page under ``watch_runs``), then wait until the run the click starts, if one starts
    within ``start_ms``, has ended with every visible chart drawn (and no second run follows within ``settle_ms``).
    A click that starts no run (a tab drawn already, an expander) costs ``start_ms``: as long as ``wait_idle``'s
    sleep, which was there to let such a run start."""
    before = page.evaluate("window.__runs")
    if before is None:
        raise RuntimeError("click_and_wait needs a page under watch_runs (its init script counts the runs)")
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    locator.click()
    try:
        page.wait_for_function("(n) => window.__runs > n", arg=before, timeout=start_ms, polling=20)
    except PlaywrightTimeout:                   # no run: the page as it is now is what the click shows
        page.wait_for_function(IDLE_JS, arg=title, timeout=90_000, polling=50)
        return
    wait_idle(page, settle_ms=settle_ms, title=title)


# ----------------------------------------------------------------------------------------------- the check
CHECK_JS = r"""(args) => {
  const TOL = 1.0;
  const isVisible = el => { const r = el.getBoundingClientRect(); return r.width > 0 || r.height > 0; };
  const tabPath = el => {
    const path = [];
    for (let p = el.parentElement; p; p = p.parentElement) {
      if (p.getAttribute && p.getAttribute('role') === 'tabpanel') {
        const id = p.getAttribute('aria-labelledby');
        const tab = id && document.getElementById(id);
        path.unshift(tab ? tab.innerText.trim() : '?');
      }
    }
    return path.join(' > ');
  };
  const role = t => { const g = t.closest('g[class*="role-"]');
    const m = g && g.getAttribute('class').match(/role-([a-z-]+)/); return m ? m[1] : 'text'; };
  const opacityOf = t => { let o = 1;
    for (let e = t; e && e.tagName !== 'svg'; e = e.parentElement) {
      const a = e.getAttribute && e.getAttribute('opacity'); if (a !== null && a !== undefined) o *= parseFloat(a);
      const fo = e.getAttribute && e.getAttribute('fill-opacity'); if (e === t && fo !== null) o *= parseFloat(fo);
    } return o; };
  // the rotated rectangle of a text element (4 corners, viewport px), height cut to the font size
  const corners = t => {
    let b; try { b = t.getBBox(); } catch (e) { return null; }
    if (!b || (b.width === 0 && b.height === 0)) return null;
    const fs = parseFloat(t.getAttribute('font-size')) || parseFloat(getComputedStyle(t).fontSize) || b.height;
    const h = Math.min(b.height, fs), y = b.y + (b.height - h) / 2;
    const m = t.getScreenCTM(); if (!m) return null;
    return [[b.x, y], [b.x + b.width, y], [b.x + b.width, y + h], [b.x, y + h]].map(([x, yy]) =>
      [m.a * x + m.c * yy + m.e, m.b * x + m.d * yy + m.f]);
  };
  const aabb = P => ({l: Math.min(...P.map(p => p[0])), r: Math.max(...P.map(p => p[0])),
                      t: Math.min(...P.map(p => p[1])), b: Math.max(...P.map(p => p[1]))});
  // separating axis test; returns the smallest penetration depth (<= 0: apart)
  const depth = (A, B) => {
    let best = Infinity;
    for (const P of [A, B]) for (let i = 0; i < 4; i++) {
      const [x1, y1] = P[i], [x2, y2] = P[(i + 1) % 4];
      let nx = y1 - y2, ny = x2 - x1; const L = Math.hypot(nx, ny); if (!L) continue; nx /= L; ny /= L;
      const pa = A.map(p => p[0] * nx + p[1] * ny), pb = B.map(p => p[0] * nx + p[1] * ny);
      const d = Math.min(Math.max(...pa), Math.max(...pb)) - Math.max(Math.min(...pa), Math.min(...pb));
      if (d < best) best = d; if (best <= 0) return best;
    }
    return best;
  };
  const clipBox = svg => {
    const r = svg.getBoundingClientRect(); let box = {l: r.left, r: r.right, t: r.top, b: r.bottom, by: 'svg'};
    // up to the main area: stMain and the app view scroll the page (not a clip); sideways overflow is h-scroll
    for (let p = svg.parentElement; p && p.getAttribute('data-testid') !== 'stMain' && p !== document.body; p = p.parentElement) {
      const cs = getComputedStyle(p), q = p.getBoundingClientRect();
      const name = p.getAttribute('data-testid') || p.tagName.toLowerCase();
      if (/hidden|clip/.test(cs.overflowX)) {
        if (q.left > box.l) { box.l = q.left; box.by = name; } if (q.right < box.r) { box.r = q.right; box.by = name; } }
      if (/hidden|clip/.test(cs.overflowY)) {
        if (q.top > box.t) { box.t = q.top; box.by = name; } if (q.bottom < box.b) { box.b = q.bottom; box.by = name; } }
    }
    return box;
  };
  // the page's own words (outside charts), to see whether a dropped label is quoted
  const main = document.querySelector('[data-testid=stMain]');
  let prose = '';
  if (main) { const clone = main.cloneNode(true);
    clone.querySelectorAll('[data-testid=stVegaLiteChart], [data-testid=stCode], [data-testid=stExpanderDetails] pre')
         .forEach(e => e.remove());
    prose = clone.textContent; }
  const esc = s => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const quoted = s => {
    if (!s || /^[-+−\d.,:%eE\s]+$/.test(s) || s.length < 2) return false;
    if (/[\u3400-\u9fff]/.test(s)) return prose.includes(s);      // Chinese has no spaces between words
    return new RegExp('(^|[^\\p{L}\\p{N}_])' + esc(s) + '($|[^\\p{L}\\p{N}_])', 'u').test(prose);
  };
  const charts = [], findings = [];
  const all = [...document.querySelectorAll('[data-testid=stVegaLiteChart]')];
  all.forEach((c, index) => {
    if (!isVisible(c)) return;
    const svg = c.querySelector('svg.marks'); if (!svg) return;
    const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim() !== '');
    const titleEl = [...texts].filter(t => role(t) === 'title-text').map(t => t.textContent.trim());
    const axisTitles = texts.filter(t => role(t) === 'axis-title').map(t => t.textContent.trim());
    let title = titleEl.length ? titleEl.join(' / ') : (axisTitles.length ? 'axes: ' + axisTitles.join(' · ') : '');
    if (title.length > 90) title = title.slice(0, 88) + '…';
    const where = {tab: tabPath(c), chart: index, title};
    const box = clipBox(svg);
    const vis = []; let dropped = 0, clippedN = 0;
    for (const t of texts) {
      const s = t.textContent.trim(), r = role(t);
      if (opacityOf(t) < 0.05) {
        if (/axis-label|legend-label/.test(r)) { dropped++;
          if (quoted(s)) findings.push({...where, kind: 'dropped-quoted', role: r, text: s,
                                         detail: 'label hidden by labelOverlap but quoted by the page'}); }
        continue;
      }
      const P = corners(t); if (!P) continue;
      const a = aabb(P);
      if (a.r - a.l < 0.5) continue;
      vis.push({t, s, r, P, a});
      if (a.l < box.l - TOL || a.r > box.r + TOL || a.t < box.t - TOL || a.b > box.b + TOL) {
        if (++clippedN > args.maxPairs) continue;
        const out = Math.max(box.l - a.l, a.r - box.r, box.t - a.t, a.b - box.b);
        findings.push({...where, kind: 'clipped', role: r, text: s, detail: `${out.toFixed(1)} px outside the ${box.by === 'svg' ? 'chart' : 'clipping ' + box.by} (box ${[box.l, box.t, box.r, box.b].map(Math.round)}; text ${[a.l, a.t, a.r, a.b].map(Math.round)})`});
      }
      if (s.endsWith('…')) findings.push({...where, kind: 'truncated', role: r, text: s,
                                           detail: 'cut by Vega labelLimit'});
    }
    if (clippedN > args.maxPairs) findings.push({...where, kind: 'clipped', role: 'many',
      text: `… and ${clippedN - args.maxPairs} more clipped texts`, detail: ''});
    let pairs = 0;
    for (let i = 0; i < vis.length; i++) for (let j = i + 1; j < vis.length; j++) {
      const A = vis[i], B = vis[j];
      if (A.a.r < B.a.l || B.a.r < A.a.l || A.a.b < B.a.t || B.a.b < A.a.t) continue;
      const d = depth(A.P, B.P);
      if (d > TOL) { pairs++;
        if (pairs <= args.maxPairs) findings.push({...where, kind: 'overlap', role: A.r + '/' + B.r,
          text: `${A.s} ⟷ ${B.s}`, detail: `${d.toFixed(1)} px`}); }
    }
    if (pairs > args.maxPairs) findings.push({...where, kind: 'overlap', role: 'many',
      text: `… and ${pairs - args.maxPairs} more overlapping pairs`, detail: ''});
    charts.push({...where, texts: vis.length, dropped, overlapping_pairs: pairs});
  });
  if (args.hscroll) {
    const de = document.scrollingElement || document.documentElement;
    if (de.scrollWidth > de.clientWidth + 1)
      findings.push({tab: '', chart: -1, title: 'page', kind: 'h-scroll', role: 'page',
                     text: `document ${de.scrollWidth} px wide in ${de.clientWidth}`, detail: ''});
    if (main) for (const e of [main, ...main.querySelectorAll('*')]) {
      if (!isVisible(e) || e.closest('[data-testid=stCode]')) continue;
      const cs = getComputedStyle(e);
      if (!/(auto|scroll)/.test(cs.overflowX) || e.scrollWidth <= e.clientWidth + 1) continue;
      const host = e.closest('[data-testid]');
      const tex = e === main ? null : e.querySelector('annotation[encoding="application/x-tex"]');
      const what = e === main ? 'main area' : tex ? 'formula' : e.querySelector('[role=tablist]') || e.getAttribute('role') === 'tablist' ? 'tab bar'
                 : host ? host.getAttribute('data-testid') : e.tagName.toLowerCase();
      const words = tex ? tex.textContent : e === main ? '' : (e.innerText || '');
      findings.push({tab: tabPath(e), chart: -1, title: '', kind: 'h-scroll', role: what,
                     text: [...words.trim().replace(/\s+/g, ' ')].slice(0, 70).join(''),
                     detail: `${e.scrollWidth} px of content in ${e.clientWidth}`});
    }
  }
  return {charts, findings};
}"""

# the top edge of every chart shown (px from the page's top), in page order
TOPS_JS = """() => [...document.querySelectorAll('[data-testid=stVegaLiteChart]')]
  .filter(c => c.offsetParent !== null && c.getBoundingClientRect().height > 0)
  .map(c => c.getBoundingClientRect().top + window.scrollY)"""

# open every visible closed expander of the main area at once; how many were opened (a locator per expander would
# shift under its own clicks: opening one changes which others match ``details:not([open])``)
OPEN_JS = """() => { let n = 0;
  for (const s of document.querySelectorAll('[data-testid=stMain] [data-testid=stExpander] details:not([open]) > summary'))
    if (s.getBoundingClientRect().width > 0) { s.click(); n++; }
  return n; }"""

# every tab button that is visible now (nested tab bars appear when their parent tab is opened)
TABS_JS = """() => [...document.querySelectorAll('[data-testid=stMain] [role=tablist]')].flatMap((list, li) =>
  [...list.querySelectorAll('[role=tab]')].filter(t => t.getBoundingClientRect().width > 0)
    .map((t, ti) => ({li, ti, label: t.innerText.trim(), selected: t.getAttribute('aria-selected') === 'true'})))"""


@dataclass
class Finding:
    page: str
    viewport: str
    lang: str
    tab: str
    chart: int
    title: str
    kind: str
    role: str
    text: str
    detail: str

    def line(self) -> str:
        where = f"chart {self.chart}" if self.chart >= 0 else "page"
        tab = f" [tab {self.tab}]" if self.tab else ""
        title = f" “{self.title}”" if self.title else ""
        return (f"{self.page:16s} {self.viewport:8s} {self.lang}  {self.kind:14s} {where}{tab}{title}: "
                f"{self.role}: {self.text!r} {self.detail}")


@dataclass
class PageReport:
    page: str
    viewport: str
    lang: str
    seconds: float
    charts: list = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    error: str = ""
    outside: list[str] = field(default_factory=list)     # requests that left localhost (the app works offline)
    main_text: str = ""                                  # the page's main area as first drawn (its title is in it)
    chart_tops: list = field(default_factory=list)       # px from the page's top of each chart shown, as first drawn
    extra: object = None                                 # what check_views' ``on_load`` returned (first size only)


def check_views(browser, base: str, key: str, lang: str, viewports: list[str], shots: pathlib.Path | None = None,
                max_pairs: int = 3, on_load=None, page=None, fresh: bool = True) -> list[PageReport]:
    """Open one page and check it at each size: open every expander, visit every tab and check every chart shown.

    ``fresh``: the sizes one after the other, the page reloaded at each, so that it is drawn as a fresh load at
    that size draws it. Otherwise one load at the first size, and each state of the page (as loaded, then each tab
    opened) checked at every size by resizing the window, as a window resized or a phone turned redraws it; then
    the page loaded afresh at each other size and checked as first drawn there (a link opened on a phone). A tab
    is opened once, not once per size: its run and its charts' first drawing are most of a visit's cost.

    ``on_load(page)``, when given, is called once, on the page as first drawn at the first size; what it returns
    is in ``reports[0].extra``. The requests that left localhost are those of the whole visit (every report holds
    the same list). ``page``: a Playwright page to visit in (under ``watch_runs``; left open), instead of a new
    context of ``browser``."""
    t0 = time.perf_counter()
    w, h = VIEWPORTS[viewports[0]]
    own = page is None
    if own:
        ctx = browser.new_context(viewport={"width": w, "height": h}, device_scale_factor=1)
        watch_runs(ctx)
        page = ctx.new_page()
    else:
        page.set_viewport_size({"width": w, "height": h})
    outside: list[str] = []

    def leaves(r) -> None:
        if urlparse(r.url).hostname not in ("localhost", "127.0.0.1", None):
            outside.append(r.url)

    def failed(e: Exception) -> str:
        return f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"

    page.on("request", leaves)
    reports = [PageReport(key, vp, lang, 0.0) for vp in viewports]
    try:
        page.goto(page_url(base, key, lang))
        wait_idle(page)
        if fresh:
            for i, report in enumerate(reports):
                t1 = t0 if i == 0 else time.perf_counter()     # the first view's time includes the load
                try:
                    if i:
                        page.set_viewport_size(dict(zip(("width", "height"), VIEWPORTS[report.viewport])))
                        page.reload()          # drawn for this size from the start, as a fresh load draws it
                        wait_idle(page)
                    _check_view(page, [report], shots, max_pairs, on_load if i == 0 else None)
                except Exception as e:  # noqa: BLE001 - reported per view, the run goes on
                    report.error = failed(e)
                report.seconds = time.perf_counter() - t1
        else:
            _check_view(page, reports, shots, max_pairs, on_load, url=page_url(base, key, lang))
            reports[0].seconds += time.perf_counter() - t0 - sum(r.seconds for r in reports)   # the load
    except Exception as e:  # noqa: BLE001
        for report in reports:
            report.error = report.error or failed(e)
    finally:
        if own:
            ctx.close()
        else:
            page.remove_listener("request", leaves)
    for report in reports:
        report.outside = outside
    return reports


def check_page(browser, base: str, key: str, lang: str, viewport: str, shots: pathlib.Path | None = None,
               max_pairs: int = 3) -> PageReport:
    """Open one page at one size, open every expander, visit every tab, and check every chart shown."""
    return check_views(browser, base, key, lang, [viewport], shots, max_pairs)[0]


def _check_view(page, reports: list[PageReport], shots, max_pairs: int, on_load, url: str | None = None) -> None:
    """Check the page, drawn at ``reports[0]``'s size, at each report's size (the window resized between them):
    as it is now, then with each tab opened (one click per tab, then the other sizes, the one shown first). With
    ``url``, the page is then loaded afresh at each other size and checked as first drawn there."""
    seen: dict[str, dict[tuple, dict]] = {r.viewport: {} for r in reports}
    now = [reports[0].viewport]

    def first_drawn(report: PageReport) -> None:
        report.main_text = page.locator("[data-testid=stMain]").inner_text()
        report.chart_tops = page.evaluate(TOPS_JS)
        if on_load is not None and report is reports[0]:
            report.extra = on_load(page)
        if shots is not None:
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / f"{report.page}_{report.lang}_{report.viewport}.png"), full_page=True)

    def resize(report: PageReport) -> None:
        page.set_viewport_size(dict(zip(("width", "height"), VIEWPORTS[report.viewport])))
        now[0] = report.viewport

    def check(report: PageReport) -> None:
        t = time.perf_counter()
        if now[0] != report.viewport:
            resize(report)
            wait_idle(page)
        if page.evaluate(OPEN_JS):                 # expanders, a tab's own included
            wait_idle(page)
        res = page.evaluate(CHECK_JS, {"maxPairs": max_pairs, "hscroll": report.viewport == "390x844"})
        for c in res["charts"]:
            seen[report.viewport].setdefault((c["tab"], c["chart"]), c)
        for f in res["findings"]:
            fd = Finding(report.page, report.viewport, report.lang, f["tab"], f["chart"], f["title"], f["kind"],
                         f["role"], f["text"], f["detail"])
            if fd not in report.findings:
                report.findings.append(fd)
        report.seconds += time.perf_counter() - t

    def check_every_size() -> None:
        for report in sorted(reports, key=lambda r: r.viewport != now[0]):    # the size shown first
            check(report)

    def exceptions() -> str:
        exc = page.locator("[data-testid=stException]").all_inner_texts()
        return "exception on the page: " + exc[0][:300] if exc else ""

    first_drawn(reports[0])
    check_every_size()
    visited = set()
    for _ in range(60):                                   # every tab, nested ones as they appear
        tabs = [t for t in page.evaluate(TABS_JS) if (t["li"], t["label"]) not in visited]
        if not tabs:
            break
        t = tabs[0]
        visited.add((t["li"], t["label"]))
        if not t["selected"]:
            started = time.perf_counter()
            click_and_wait(page, page.locator("[data-testid=stMain] [role=tablist]").nth(t["li"]).locator(
                "[role=tab]").filter(has_text=t["label"]).first)
            next(r for r in reports if r.viewport == now[0]).seconds += time.perf_counter() - started
            check_every_size()
    error = exceptions()
    for report in reports[1:] if url else ():             # each other size as a fresh load draws it
        started = time.perf_counter()
        resize(report)
        page.goto(url)
        wait_idle(page)
        first_drawn(report)
        report.seconds += time.perf_counter() - started
        check(report)
        error = error or exceptions()
    for report in reports:
        report.error = report.error or error
        report.charts = list(seen[report.viewport].values())


def run(root: pathlib.Path, keys: list[str], langs: list[str], viewports: list[str],
        shots: pathlib.Path | None = None, log=print) -> list[PageReport]:
    from playwright.sync_api import sync_playwright
    proc = start_server(root)
    reports = []
    try:
        with sync_playwright() as p:
            browser = launch_browser(p)
            for key in keys:
                for lang in langs:
                    for r in check_views(browser, proc.base, key, lang, viewports, shots):   # one visit, every size
                        reports.append(r)
                        log(f"# {key} {lang} {r.viewport}: {len(r.charts)} charts, {len(r.findings)} problems, "
                            f"{r.seconds:.1f} s {r.error}")
                        for f in r.findings:
                            log("  " + f.line())
                    if reports[-1].outside:
                        log(f"  requests leaving localhost during the visit: {reports[-1].outside[:5]}")
            browser.close()
    finally:
        stop_server(proc)
    return reports


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=pathlib.Path, default=TOOL_ROOT, help="checkout of the app to check")
    ap.add_argument("--pages", nargs="*", help="page keys (default: every registered page)")
    ap.add_argument("--lang", nargs="*", default=["en"], choices=["en", "zh"])
    ap.add_argument("--viewport", nargs="*", default=list(VIEWPORTS), choices=list(VIEWPORTS))
    ap.add_argument("--shots", type=pathlib.Path, help="directory for full-page screenshots")
    ap.add_argument("--json", type=pathlib.Path, help="write every finding and chart record here")
    a = ap.parse_args()
    root = a.root.resolve()
    keys = a.pages or page_keys(root)
    t0 = time.perf_counter()
    reports = run(root, keys, a.lang, a.viewport, a.shots)
    total = sum(len(r.findings) for r in reports)
    by_kind: dict[str, int] = {}
    for r in reports:
        for f in r.findings:
            by_kind[f.kind] = by_kind.get(f.kind, 0) + 1
    print(f"\n{total} problems on {len(reports)} page views ({by_kind}); "
          f"{sum(bool(r.error) for r in reports)} page errors; {time.perf_counter() - t0:.0f} s")
    if a.json:
        a.json.write_text(json.dumps([asdict(r) for r in reports], ensure_ascii=False, indent=1), errors="replace")
    sys.exit(1 if total or any(r.error for r in reports) else 0)


if __name__ == "__main__":
    main()
