"""QK-norm and logit growth: a small decoder trained at a high learning rate, without and with QK-norm.

The recorded runs (``python -m attention_core.labs.qk_norm --record`` -> assets/models/qk_norm_runs.json) show,
per learning rate and seed, the loss, the largest attention logit and the mean attention entropy of each layer
over training; the final loss against the learning rate is the "LR sensitivity" figure of Wortsman et al. (2023).
Why it happens is computed live: the untrained model with its W_Q, W_K multiplied by a factor (weights that
grew), and one softmax row made sharper (its gradient vanishing). A short run with or without QK-norm trains
live through the server's queue (serving.training_queue) and draws its curves as it goes.
"""
from __future__ import annotations

from attention_core.decoder import CausalSelfAttention
from attention_core.labs import qk_norm as lab
from ui import anatomy, live_run, presenter
from ui import qk_norm_sections as sec
from ui.i18n import t

NS = "qk_norm"


# ------------------------------------------------------------------ the live run (in the server's queue)
LIVE = live_run.LiveRun(NS, "_qk_ticket", sec.job, sec.keep, sec.draw_live, progress=sec.progress_text,
                        again=lambda spec: any(r["spec"] == spec for r in sec.live_runs()))   # kept already: train anew


# ------------------------------------------------------------------ fragments: a control reruns only its part
# (``lesson.part``; elements outside a fragment are not re-sent: the redraw budget).
def recorded_sections(lesson: presenter.Lesson, doc) -> tuple[float, int]:
    """The learning rate and seed of the recorded runs and their curves (on a full run: the chosen rate, seed)."""
    with lesson.step("controls", keep=True):
        lr, seed = sec.controls_section(doc)
    with lesson.step("evidence"):
        sec.evidence_section(doc, lr, seed)
    return lr, seed


def why_fragment(lesson: presenter.Lesson) -> None:
    with lesson.step("why", shows=(lab.grown_weights, lab.attention_stats, CausalSelfAttention.logits,
                                   CausalSelfAttention.project, lab.logit_bound)):
        sec.why_section()


# ------------------------------------------------------------------ the page
anatomy.header(NS)
lesson = presenter.Lesson(NS)
shown_doc = sec.recorded()
with lesson.step("intuition"):
    anatomy.intuition(NS)
    anatomy.formula(r"\ell_{ij} = \frac{q_i \cdot k_j}{\sqrt{d_{head}}},\qquad |\ell_{ij}| \le "
                    r"\frac{|q_i|\,|k_j|}{\sqrt{d_{head}}}", t(f"{NS}.formula_caption"))
    anatomy.formula(r"\hat q = g_q \odot \frac{q}{\mathrm{RMS}(q)},\quad \hat k = g_k \odot \frac{k}{\mathrm{RMS}(k)}")
    anatomy.formula(r"|\ell_{ij}| \le \max|g_q|\,\max|g_k|\,\sqrt{d_{head}}\;",   # \; : the root's tip stays inside
                    t(f"{NS}.formula_qk_caption"))
with lesson.step("question"):
    sec.question_section(shown_doc)
chosen_seed = lesson.part(recorded_sections, lesson, shown_doc)[1]
with lesson.step("sweep"):
    sec.sweep_section(shown_doc)
lesson.part(why_fragment, lesson)
with lesson.step("saturation", shows=(lab.softmax_jacobian, lab.saturation)):
    sec.saturation_section()
with lesson.step("live"):
    sec.live_section(chosen_seed, LIVE)    # a full run (the Train button) reads the seed chosen above
    if sec.live_runs():                    # a run of this session trained in the queue's worker
        lesson.shows(lab.train_run)
with lesson.step("pitfall"):
    sec.pitfall_section()
lesson.end()
