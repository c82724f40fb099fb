"""Summary: the first tutorial's chapter review (section 11) and every key formula of the app, each linked
to the page that runs it — the page a student prints before an exam."""
import streamlit as st

from ui import anatomy
from ui.i18n import lesson, t
from ui.registry import available_pages

NS = "summary"

# (key, LaTeX, page that runs it). The symbols are those of the pages. Each formula is written in short rows
# (``rows``: a phone's bordered box is 326 px wide) and ends with a thin space (KaTeX's last column overhangs 2 px).
FORMULAS = (
    ("general", [r"\mathrm{Attention}(Q, K, V)", r"= \mathrm{softmax}\big(\mathrm{sim}(Q, K)\big)\,V"], "qkv"),
    ("kernel", [r"f(x) = \sum_{i=1}^{n} \mathrm{softmax}_i\!\left(-\frac{(x - x_i)^2}{2h^2}\right) y_i"], "qkv"),
    ("additive", [r"\mathrm{sim}(q, k) = v^{\top}\tanh\!\left(W_q\,q + W_k\,k\right)"], "qkv"),
    ("dot", [r"\mathrm{sim}(q, k) = q^{\top}k \qquad \mathrm{sim}(q, k) = \frac{q^{\top}k}{\sqrt{d_k}}"],
     "scaling"),
    ("sdpa", [r"\mathrm{Attention}(Q, K, V)", r"= \mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}}\right)V"], "qkv"),
    ("variance", [r"\mathrm{Var}\big(q^{\top}k\big) = d_k \;\Rightarrow\; "
                  r"\mathrm{Var}\!\left(\frac{q^{\top}k}{\sqrt{d_k}}\right) = 1"], "scaling"),
    ("mask", [r"\mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}} + M\right)V",
              r"M_{ij} = \begin{cases} 0 & \text{@visible@} \\ -\infty & \text{@hidden@} \end{cases}"], "masking"),
    ("multihead", [r"\mathrm{MultiHead}(Q, K, V)", r"= \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)\,W^{O}",
                   r"\mathrm{head}_i = \mathrm{Attention}(Q_i, K_i, V_i)",
                   r"Q_i = QW_i^{Q},\; K_i = KW_i^{K},\; V_i = VW_i^{V}", r"d_k = d_{model}/h"],
     "multihead"),
    ("sinusoidal", [r"PE_{(pos,\,2i)} = \sin\!\left(\frac{pos}{10000^{2i/d_{model}}}\right)",
                    r"PE_{(pos,\,2i+1)} = \cos\!\left(\frac{pos}{10000^{2i/d_{model}}}\right)"], "positional"),
    ("encoder", [r"x' = \mathrm{LN}\big(x + \mathrm{MHA}(x)\big)", r"y = \mathrm{LN}\big(x' + \mathrm{FFN}(x')\big)",
                 r"\mathrm{FFN}(x) = \max(0,\, xW_1 + b_1)\,W_2 + b_2"], "encoder"),
    ("cross", [r"\mathrm{CrossAttention}(X_{tgt}, X_{src})",
               r"= \mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}}\right)V",
               r"Q = X_{tgt}W_Q", r"K = X_{src}W_K,\;\; V = X_{src}W_V"], "cross_attention"),
    ("paths", [r"\text{@layers@}(i \to j):",
               r"\underbrace{1}_{\text{@self@}}\qquad \underbrace{|i - j|}_{\text{RNN}}\qquad "
               r"\underbrace{\lceil |i - j| / r \rceil}_{\text{@restricted@}}"], "cross_attention"),
    ("bahdanau", [r"e_{tj} = v^{\top}\tanh\!\left(W s_{t-1} + U h_j\right)",
                  r"\alpha_{tj} = \frac{\exp e_{tj}}{\sum_{j'} \exp e_{tj'}},\quad c_t = \sum_j \alpha_{tj}\,h_j"],
     "alignment"),
    ("linear", [r"\mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d}}\right)V",
                r"\approx\; \frac{\phi(Q)\big(\phi(K)^{\top}V\big)}{\phi(Q)\,\phi(K)^{\top}\mathbf{1}}",
                r"\phi(x) = \mathrm{elu}(x) + 1"], "efficiency"),
    ("online", [r"m^{new} = \max\!\big(m,\ \max_j s_j\big)",
                r"\ell^{new} = e^{\,m - m^{new}}\,\ell + \sum_j e^{\,s_j - m^{new}}"], "efficiency"),
    ("entropy", [r"H(w_i) = -\sum_j w_{ij}\log w_{ij}", r"0 \le H \le \log n"], "analysis"),
    ("rollout", [r"\hat A_\ell = \mathrm{rownorm}\Big(\frac{1}{h}\sum_i A_\ell^{(i)} + I\Big)",
                 r"R = \hat A_L\,\hat A_{L-1}\cdots\hat A_1"], "analysis"),
    ("schedule", [r"\eta_s = \eta\cdot", r"\begin{cases}\dfrac{s+1}{w} & s < w\\[4pt]"
                  r"\tfrac12\big(1+\cos\big(\pi\,\frac{s-w}{S-1-w}\big)\big) & s \ge w\end{cases}"], "training"),
)


def rows(lines: list[str]) -> str:
    """One formula from its rows: centred one under the other, a thin space after (see FORMULAS)."""
    return (lines[0] if len(lines) == 1 else r"\begin{gathered}" + r"\\ ".join(lines) + r"\end{gathered}") + r"\,"



def localised(latex: str) -> str:
    """The few words inside formulas, in the page's language (@word@ -> summary.word)."""
    for word in ("visible", "hidden", "layers", "restricted", "self"):
        latex = latex.replace(f"@{word}@", t(f"summary.{word}"))
    return latex


anatomy.header(NS)
st.markdown(lesson("summary/concepts"))

st.header(t("summary.formulas"))
st.caption(t("summary.formulas_caption"))
pages = {spec.key: spec for spec in available_pages()}
for key, latex, page in FORMULAS:
    with st.container(border=True):
        st.markdown(f"**{t(f'summary.f_{key}')}**")
        st.latex(localised(rows(latex)))
        st.caption(t(f"summary.f_{key}_note"))
        spec = pages.get(page)
        if spec is not None:
            st.page_link(spec.file, label=t("summary.run_it", page=t(f"nav.{page}")), icon=spec.icon)

st.header(t("summary.one_sentence"))
st.success(t("summary.one_sentence_text"), icon=":material/summarize:")
