"""The template page (app_pages/template.py) stays a working example of the page anatomy (README: "Adding a
concept page"): it opens in both languages, its chart is the library's softmax, the question comes before the
chart, bad input gets a message, and it shows the code that ran."""
import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core.text import embed_tokens, tokenize
from tests.apptest_util import ROOT, chart_data, exceptions
from ui.i18n import catalog

PAGE = str(ROOT / "app_pages" / "template.py")


def open_template(lang="en", **params) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.query_params["lang"] = lang
    at.session_state["lang"] = lang          # the router (app.py) resolves the language; this page runs alone
    for name, value in params.items():
        at.query_params[name] = value
    return at.run()


def oracle(text: str, tau: float, seed: int = 0) -> np.ndarray:
    """softmax(X X^T / (sqrt(16) tau)) in float64 numpy, from the same seeded embeddings."""
    x = embed_tokens(tokenize(text), 16, seed=seed).double().numpy()
    s = x @ x.T / (4.0 * tau)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def order_of(at: AppTest) -> list[str]:
    """Element types of the main area in the order they are drawn."""
    out = []

    def walk(node):
        kind = getattr(node, "type", None)
        if kind:
            out.append(kind)
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at.main)
    return out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_template_opens_and_its_chart_is_the_librarys_softmax(lang):
    text, tau = "the cat saw the dog", 2.0
    at = open_template(lang, text=text, tau=str(tau))
    assert exceptions(at) == []
    assert at.title[0].value == catalog(lang)["template.title"]
    (chart,) = at.get("vega_lite_chart")
    frame = next(iter(chart_data(chart).values())).sort_values(["query_pos", "key_pos"])
    got = frame["value"].to_numpy().reshape(5, 5)
    assert np.abs(got - oracle(text, tau)).max() < 1e-6
    assert np.allclose(got.sum(axis=1), 1.0, atol=1e-6)
    kinds = order_of(at)
    chart_type = next(k for k in kinds if "vega_lite_chart" in k)
    assert kinds.index("radio") < kinds.index(chart_type)      # the question comes before the evidence


def test_template_notice_quotes_the_numbers_on_screen():
    at = open_template("en", text="a b c", tau="0.5")
    w = oracle("a b c", 0.5)
    diag = f"{100 * np.mean(np.diag(w)):.1f}%"
    notices = "\n".join(m.value for m in at.markdown)
    assert catalog("en")["template.notice_diag"].format(diag=diag, tau="0.50") in notices
    k = int(np.sum(w.argmax(axis=1) == np.arange(3)))
    assert catalog("en")["template.notice_argmax"].format(k=k, n=3) in notices


@pytest.mark.parametrize("text, charts", [("", 0), ("   ", 0), ("<b>x</b> 好 🤖 " * 40, 1)])
def test_template_bad_input_gets_a_message_not_a_traceback(text, charts):
    at = open_template("zh", text=text)
    assert exceptions(at) == []
    assert len(at.warning) == 1                              # empty text, or cut to 16 tokens: said in Chinese
    assert any("\u4e00" <= ch <= "\u9fff" for ch in at.warning[0].value)
    assert len(at.get("vega_lite_chart")) == charts
    assert all("<b>" not in md.value for md in at.markdown)  # user text is data, never markup


def test_template_shows_the_code_that_ran(monkeypatch):
    """"Show the code" names the functions that ran; their source is drawn once its expander is open (it is
    lazy: ``?code_template=true``, the key ``ui.presenter.code_key`` gives). The page lists nothing itself: the
    evidence step declares what it runs and the lesson's end draws it."""
    import ui.code_view
    from ui.presenter import code_key
    shown, original = [], ui.code_view.show_code
    monkeypatch.setattr(ui.code_view, "show_code", lambda *objs, **kw: (shown.append(objs), original(*objs, **kw))[1])
    at = open_template("en")
    names = [[o.__name__ for o in objs] for objs in shown]
    assert names == [["self_attention_weights", "scaled_dot_product_attention"]]
    assert not [c for c in at.caption if "scaled_dot_product_attention" in c.value]     # closed
    at = open_template("en", **{code_key("template"): "true"})
    captions = [c.value for c in at.caption]
    assert any("pages.template.self_attention_weights" in c or "self_attention_weights" in c for c in captions)
    assert any("scaled_dot_product_attention" in c for c in captions)


def test_presenter_mode_steps_through_the_template():
    """?present=1&step=k: the step bar (Previous / Step k of n / Next / leave) and CSS that shows only step k;
    Next moves the step in the URL; without ?present the page draws no bar and no CSS."""
    at = open_template("en", present="1", step="2")
    assert exceptions(at) == []
    labels = [b.label for b in at.button]
    assert {"Previous", "Next", "Leave presenter mode"} <= set(labels)
    (css,) = [h.proto.body for h in at.get("html")]
    assert ":not(.st-key-present_step_2)" in css    # the layout (no sidebar, large type): the router's early_css
    steps = at.session_state["_present_steps_template"]
    assert steps == 4 and any(f"Step 2 of {steps}" == m.value for m in at.markdown)   # the kept controls are no step
    at.button(key="present_next").click().run()
    assert at.query_params["step"] in (["3"], "3")
    plain = open_template("en")
    assert not plain.get("html") and "present_next" not in [b.key for b in plain.button]
