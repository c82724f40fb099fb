"""The encoder block: one layer as a flow of sublayers with live tensors, post-LN vs pre-LN across a
stack, attention per layer and its rollout, dropout on the weights in train vs eval mode. The sections' bodies are in
ui/encoder_sections.py."""
from __future__ import annotations

from attention_core import analysis, transformer
from attention_core.labs import encoder as lab
from ui import anatomy, presenter
from ui import encoder_sections as sec
from ui.i18n import t

NS = "encoder"
TABS = ("layer", "prepost", "stack", "dropout")   # the page's tabs, in lesson order
LATEX = (r"\begin{aligned}"     # one equation a row: it fits a phone's column
         r"&\textbf{post-LN:}\; x \leftarrow \mathrm{LN}(x + \mathrm{MHA}(x)),\;\\"
         r"&\phantom{\textbf{post-LN:}}\; x \leftarrow \mathrm{LN}(x + \mathrm{FFN}(x))\;\\[2pt]"
         r"&\textbf{pre-LN:}\; x \leftarrow x + \mathrm{MHA}(\mathrm{LN}(x)),\;\\"
         r"&\phantom{\textbf{pre-LN:}}\; x \leftarrow x + \mathrm{FFN}(\mathrm{LN}(x))\;\\[4pt]"
         r"&\mathrm{FFN}(x) = W_2\,\sigma(W_1 x + b_1) + b_2\;\\"
         r"&\mathrm{LN}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma_x^2 + \epsilon}} + \beta\;"
         r"\end{aligned}\;")     # \; past the table: KaTeX's 2 px strut at its right edge stays inside
# the code of the stacks every tab draws from (``sec.run_stacks``): the encoders built, run step by step, rolled out
STACK_CODE = (transformer.TransformerEncoderLayer.forward_trace, transformer.PositionWiseFFN,
              transformer.TransformerEncoder.trace_embeddings, lab.encoder_for, lab.residual_stream_rms,
              analysis.attention_rollout)


# ------------------------------------------------------------------ tabs (each a fragment, ``lesson.part``: its own
# controls rerun only the tab)
def layer_tab(lesson: presenter.Lesson, choice: sec.Choice) -> None:
    with lesson.step("layer controls", keep=True):
        layer_index = sec.layer_controls(choice.n_layers)
    with lesson.step("layer evidence"):
        sec.layer_section(choice, layer_index)


def prepost_tab(lesson: presenter.Lesson, choice: sec.Choice) -> None:
    """The question before the stream's scale that answers it."""
    with lesson.step("post/pre question"):
        sec.prepost_question(choice)
    with lesson.step("post/pre evidence"):
        sec.prepost_section(choice)
    with lesson.step("post/pre pitfalls"):     # the double residual's demo declares its code
        sec.prepost_pitfalls(choice, sec.shown_layer(choice.n_layers))


def stack_tab(lesson: presenter.Lesson, choice: sec.Choice) -> None:
    with lesson.step("stack evidence"):
        sec.stack_section(choice)


def dropout_tab(lesson: presenter.Lesson, choice: sec.Choice) -> None:
    """The question before the weights and row sums that answer it."""
    head_shown = sec.shown_tile(choice)[1] - 1
    with lesson.step("dropout controls", keep=True):
        p = sec.dropout_controls()
    drop = sec.dropout_demo(choice.setup, choice.variant, p)
    presenter.shows(lab.attention_dropout)
    with lesson.step("dropout question"):
        sec.dropout_question(drop, head_shown)
    with lesson.step("dropout evidence"):
        sec.dropout_section(choice, head_shown, p, drop)
    with lesson.step("dropout pitfall"):
        anatomy.pitfall(t("encoder.pit_dropout_title"), t("encoder.pit_dropout_body"),
                        code=t("encoder.pit_dropout_code"))


# ------------------------------------------------------------------ page
anatomy.header(NS)
lesson = presenter.Lesson(NS)          # presenter mode (?present=1) shows one step at a time
with lesson.step("intuition"):
    anatomy.intuition(NS)
    anatomy.formula(LATEX, t("encoder.formula_caption"))


def page_body(lesson: presenter.Lesson) -> None:
    """The controls and the open tab as one fragment: a control (the seed, the sentence ...) reruns and redraws only
    this part, not the title, intuition and formula above it nor the sidebar (the redraw budget). The tabs' own
    controls rerun only their tab (nested fragments)."""
    with lesson.step("controls", keep=True):
        choice = sec.controls_section()
    if choice is None:
        return
    tabs = lesson.tabs([t(f"encoder.tab_{k}") for k in TABS], lazy=True, key="tab", bind="query-params")
    for i, (tab, body) in enumerate(zip(tabs, (layer_tab, prepost_tab, stack_tab, dropout_tab))):
        if tab.open or (tab.open is None and i == 0):     # lazy: only the open tab runs
            with tab:
                presenter.shows(*STACK_CODE)              # every tab draws from the stacks
                if body is prepost_tab:
                    body(lesson, choice)
                else:
                    lesson.part(body, lesson, choice)


lesson.part(page_body, lesson)
lesson.end()          # and "Show the code": the stacks' code, then what the open tab's demo or dropout ran
