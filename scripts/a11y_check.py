"""WCAG 2.1 A and AA in a real browser: axe-core (bundled by ``axe-playwright-python``, nothing downloaded) on the
page as it is now, and the text alternative of every chart drawn. ``tests/test_layout.py`` runs it in the same visit
as the layout check (every page, both languages, at 1280x720); ``tests/test_a11y.py`` tests the check itself and
the keyboard."""
from __future__ import annotations

TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
FAILING = ("critical", "serious")

# Streamlit's own sidebar navigation (st.navigation with sections, 1.67) puts each section, a <div> holding the
# section's heading and its <li> items, directly inside <ul data-testid="stSidebarNavItems">: the <ul> has <div>
# children (axe "list") and the <li>s have no list parent (axe "listitem"). That markup is Streamlit's, not the
# app's (to be reported upstream); exactly those two findings on exactly those elements are set aside, every other
# rule still runs on the navigation.
UPSTREAM_JS = """([rule, target]) => {
  const el = document.querySelector(target);
  if (!el) return false;
  const nav = el.closest('[data-testid=stSidebarNavItems]');
  if (rule === 'list') return el.matches('ul[data-testid=stSidebarNavItems]');
  if (rule === 'listitem') return !!nav && el.tagName === 'LI' && el.parentElement.tagName === 'DIV'
                                  && el.parentElement.parentElement === nav;
  return false;
}"""


def is_upstream(page, rule: str, target: str) -> bool:
    return rule in ("list", "listitem") and page.evaluate(UPSTREAM_JS, [rule, target])


def run_axe(page) -> list[dict]:
    """Every WCAG 2.1 A/AA violation on the page now, one dict per element: rule, impact, target, html, summary,
    upstream (Streamlit's navigation markup, see above)."""
    from axe_playwright_python.sync_playwright import Axe

    result = Axe().run(page, options={"runOnly": {"type": "tag", "values": TAGS}, "resultTypes": ["violations"]})
    found = []
    for v in result.response["violations"]:
        for node in v["nodes"]:
            target = " ".join(str(t) for t in node["target"])
            found.append({"rule": v["id"], "impact": node.get("impact") or v["impact"], "target": target,
                          "html": node["html"][:160], "summary": (node.get("failureSummary") or "")[-220:],
                          "upstream": is_upstream(page, v["id"], target)})
    return found


def app_failures(found: list[dict]) -> list[dict]:
    return [f for f in found if f["impact"] in FAILING and not f["upstream"]]


def chart_labels(page) -> list[str | None]:
    """The text alternative of every chart drawn (vega-embed writes the spec's description as its aria-label)."""
    return page.evaluate("[...document.querySelectorAll('[data-testid=stVegaLiteChart]')]"
                         ".filter(c => c.querySelector('svg.marks, canvas.marks'))"      # drawn (not in a closed tab)
                         ".map(c => c.getAttribute('aria-label'))")


def describe(found: list[dict]) -> str:
    return "\n".join(f"{f['impact']:8s} {f['rule']:28s} {f['target'][:90]}  {f['html'][:90]}  {f['summary'][-110:]}"
                     .replace("\n", " ") for f in found)
