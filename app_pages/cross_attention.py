"""Cross-attention and cross-modal attention: queries from one sequence, keys and values from another.

A decoder's words over an encoded source sentence (English -> Chinese), then the second tutorial's
CrossModalAttention (fixed): caption words over the patches of a picture drawn in code, and the
gated fusion of the text with the image summary.
"""
from __future__ import annotations

from attention_core import crossmodal, modules
from attention_core.labs import cross_attention as lab
from ui import anatomy, presenter
from ui import cross_attention_sections as sec
from ui.i18n import t

NS = "cross_attention"
TABS = ("decoder", "crossmodal", "paths")   # the page's tabs, in lesson order
# short rows (a phone is 358 px wide): the cross-attention, then where Q, K and V come from
FORMULA = (r"\begin{gathered}\mathrm{CrossAttention}(X_{tgt}, X_{src}) \\ "
           r"= \mathrm{softmax}\left(\frac{QK^{\top}}{\sqrt{d_k}}\right) V \\ "
           r"Q = X_{tgt}W_Q \\ K = X_{src}W_K,\;\; V = X_{src}W_V\end{gathered}\,")


# ------------------------------------------------------------------ the page
anatomy.header(NS)
lesson = presenter.Lesson(NS)          # presenter mode (?present=1) shows one step at a time
with lesson.step("intuition"):
    anatomy.intuition(NS)
    anatomy.formula(FORMULA, t("cross_attention.formula_caption"))
decoder_tab, crossmodal_tab, paths_tab = lesson.tabs([t(f"cross_attention.tab_{k}") for k in TABS], lazy=True,
                                                     key="tab", bind="query-params")


# Each tab's controls and what they drive run as an st.fragment (the redraw budget): a control (the seed too) reruns
# and redraws only that part of the tab (``lesson.part``); the tab's heading and lesson text stay outside it and are
# not re-sent.
def decoder_part() -> None:
    with lesson.step("decoder controls", keep=True):           # no exercise here: the translation, then the notice
        translation, seed = sec.decoder_controls()
    if translation is not None:
        with lesson.step("decoder evidence", shows=(lab.decoder_cross_attention, modules.MultiHeadAttention.forward)):
            sec.decoder_section(translation, seed)


def decoder_tab_body() -> None:
    with lesson.step("decoder lesson", keep=True):     # the tab's heading and lesson: static, outside the fragment
        sec.decoder_intro()
    lesson.part(decoder_part)


def crossmodal_part() -> None:
    with lesson.step("crossmodal controls", keep=True):
        scene, seed = sec.crossmodal_controls()
    seen = None
    if scene is not None:
        with lesson.step("crossmodal evidence",
                         shows=(crossmodal.CrossModalAttention.forward, crossmodal.grounded_features)):
            seen = sec.crossmodal_section(scene, seed)
    with lesson.step("crossmodal pitfall"):          # its demo runs on this caption: inside the fragment
        anatomy.pitfall(t("cross_attention.pit_title"), t("cross_attention.pit_body"),
                        code=t("cross_attention.pit_code"),
                        demo=lambda: sec.gate_demo(seen.n_words if seen else 7, seen.shape if seen else None))


def crossmodal_tab_body() -> None:
    with lesson.step("crossmodal lesson", keep=True):     # the tab's heading and lesson: static, outside the fragment
        sec.crossmodal_intro()
    with lesson.step("crossmodal question"):        # the "green" question before the controls and the weights
        sec.crossmodal_question()
    lesson.part(crossmodal_part)


def paths_part() -> None:
    with lesson.step("paths controls", keep=True):              # the path-length question before Table 1
        paths = sec.paths_controls()
    with lesson.step("paths question"):
        sec.paths_question(paths.n)
    with lesson.step("paths evidence", shows=(lab.layer_connections, lab.path_lengths, lab.table1)):
        sec.paths_section(paths)


def paths_tab_body() -> None:
    with lesson.step("paths lesson", keep=True):     # the tab's heading and lesson: static, outside the fragment
        sec.paths_intro()
    lesson.part(paths_part)


# lazy tabs (the redraw budget): only the open tab runs and draws, so a new seed redraws two charts, not five
for tab, body in zip((decoder_tab, crossmodal_tab, paths_tab), (decoder_tab_body, crossmodal_tab_body, paths_tab_body)):
    if tab.open or (tab.open is None and body is decoder_tab_body):   # None: no state yet (the first tab)
        with tab:
            body()
lesson.end()
