"""Open any page of the app in Streamlit's AppTest, in a chosen language."""
from __future__ import annotations

import io
import json
import pathlib

import pyarrow as pa
from streamlit.testing.v1 import AppTest

ROOT = pathlib.Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
NOT_LESSONS = {"home", "glossary", "summary", "poll", "teach"}     # pages without presenter steps


def lesson_pages() -> list[str]:
    """The concept pages, in the course's order: each is a lesson with presenter steps and a chart up front."""
    from ui.registry import available_pages
    return [p.key for p in available_pages() if p.key not in NOT_LESSONS]


def held_back(at: AppTest) -> bool:
    """The last run drew no page: a session's first run in presenter mode waits for the browser to report that
    the layout's CSS applies (``ui.presenter.styling_first``)."""
    return any(getattr(el, "key", None) == "presenter_style_ready" for el in at.main.children.values())


def run(at: AppTest) -> AppTest:
    """``at.run()``, and again where the run was held back: the report a browser would send (AppTest runs no
    JavaScript)."""
    at.run()
    if held_back(at):
        at.run()
    return at


def open_page(key: str, lang: str = "en", params: dict | None = None, timeout: float = 60) -> AppTest:
    """The router's first run of a new session at ``app_pages/<key>.py``, with ?lang= and other params: what a
    link to the page opens (a run of home first, then the move, cost every test one home page more)."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    at.query_params["lang"] = lang
    for name, value in (params or {}).items():
        at.query_params[name] = value
    if key != "home":
        at.switch_page(f"app_pages/{key}.py")
    return run(at)


def exceptions(at: AppTest) -> list[str]:
    return [e.value for e in at.exception]


def charts(at: AppTest) -> list:
    """The page's charts in drawing order, without the intuition's picture (``ui.pictures``)."""
    return [c for c in at.get("vega_lite_chart") if '"picture": true' not in c.proto.spec]


def chart_spec(chart) -> dict:
    return json.loads(chart.proto.spec)


def chart_data(chart) -> dict:
    """Every dataset of a Vega-Lite chart element as pandas DataFrames, by dataset name."""
    frames = {}
    for ds in chart.proto.datasets:
        frames[ds.name] = pa.ipc.open_stream(io.BytesIO(ds.data.data)).read_all().to_pandas()
    if chart.proto.data.data:
        frames[""] = pa.ipc.open_stream(io.BytesIO(chart.proto.data.data)).read_all().to_pandas()
    return frames


def all_text(at: AppTest) -> str:
    """The visible text of a run (markdown, titles, captions, alerts...), joined."""
    parts = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error",
                 "success", "latex", "text", "code"):
        parts.extend(str(el.value) for el in at.get(kind))
    return "\n".join(parts)


def assert_same_spec(made: dict, fresh: dict) -> None:
    """Two finished Vega-Lite specs (``ui.charts.to_spec``) are the same chart: equal specs and equal data.
    Altair names each view "view_<hash>_<n>"; those names only link a selection to its view, so they are
    renamed before comparing."""
    import re

    import pandas as pd

    def plain(spec: dict) -> dict:
        text = json.dumps({k: v for k, v in spec.items() if k != "datasets"}, sort_keys=True)
        return json.loads(re.sub(r"view_[0-9a-f]+_\d+", "view", text))

    assert plain(made) == plain(fresh)
    assert made.get("datasets", {}).keys() == fresh.get("datasets", {}).keys()
    for name in fresh.get("datasets", {}):
        pd.testing.assert_frame_equal(made["datasets"][name], fresh["datasets"][name])


def label_parts(key: str, lang: str = "en", **fields) -> list[str]:
    """The label ``key`` as a page shows it, with ``fields`` filled in: the pieces between the placeholders
    the caller does not know (a test that knows only some of the numbers checks every piece it can)."""
    import string

    from ui.i18n import catalog

    parts, piece = [], ""
    for literal, field, spec, conv in string.Formatter().parse(str(catalog(lang)[key])):
        piece += literal
        if field is None:
            continue
        if field in fields:
            value = repr(fields[field]) if conv == "r" else str(fields[field]) if conv == "s" else fields[field]
            piece += format(value, spec)
        else:
            parts.append(piece)
            piece = ""
    parts.append(piece)
    return [p for p in parts if p]


def shows_label(text: str, key: str, lang: str = "en", **fields) -> bool:
    """``text`` shows the label ``key`` (every piece of it that ``fields`` determine)."""
    return all(part in text for part in label_parts(key, lang, **fields))


def label_pattern(key: str, lang: str = "en", **groups: str) -> str:
    """A regular expression matching the label ``key`` as shown: each field named in ``groups`` becomes a
    named group with that pattern (read it with ``match.group(name)``), every other field matches anything."""
    import re
    import string

    from ui.i18n import catalog

    pattern, seen = "", set()
    for literal, field, _, _ in string.Formatter().parse(str(catalog(lang)[key])):
        pattern += re.escape(literal)
        if field is None:
            continue
        if field in groups:
            pattern += f"(?P={field})" if field in seen else f"(?P<{field}>{groups[field]})"
            seen.add(field)
        else:
            pattern += ".*?"
    return pattern


def title_text(spec: dict, sep: str = " ") -> str | None:
    """A spec's title as text: plain or ``{"text": ...}`` (a title whose cut-off follows the container,
    ``ui.charts.sized_title``), a title of several lines (``ui.wrap.title_lines``) joined by ``sep``."""
    got = spec.get("title")
    got = got.get("text") if isinstance(got, dict) else got
    return sep.join(got) if isinstance(got, list) else got


def chart_titled(at: AppTest, title: str | list[str]):
    """The (first) chart whose title is ``title`` (a text, or its lines); fails listing the titles shown."""
    want = " ".join(title) if isinstance(title, (list, tuple)) else title
    found = [c for c in charts(at) if title_text(chart_spec(c)) == want]
    assert found, f"no chart titled {title!r}: {[title_text(chart_spec(c)) for c in charts(at)]}"
    return found[0]


def presenter_steps(at: AppTest) -> dict[str, list[tuple[str, str]]]:
    """Presenter mode (``ui.presenter``): each step container (``present_step_<i>``, ``present_keep_<i>``) in page
    order, with the elements drawn inside it as (kind, key or value); a tab's content counts in its step."""
    steps: dict[str, list[tuple[str, str]]] = {}

    def walk(node, step: str | None) -> None:
        kind, key = getattr(node, "type", None), str(getattr(node, "key", None) or "")
        if key.startswith(("present_step_", "present_keep_")):
            step = key
            steps.setdefault(step, [])
        elif kind and step is not None:
            value = getattr(node, "value", "")
            steps[step].append((kind, key or (value if isinstance(value, str) else "")))
        for child in getattr(node, "children", {}).values():
            walk(child, step)

    walk(at.main, None)
    return steps


def kinds_in_order(at: AppTest) -> list[str]:
    """The element types of the page's main area in document order (what a learner meets first comes first); the
    intuition's picture (``ui.pictures``) is left out, as by ``charts``."""
    out = []

    def walk(node):
        kind = getattr(node, "type", None)
        if kind == "vega_lite_chart" and '"picture": true' in node.proto.spec:
            return
        if kind:
            out.append(kind)
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at.main)
    return out
