"""Training live: a short, capped training run of a small model in the app (the second tutorial's
TransformerTrainer, fixed), with the loss curve and attention snapshots: attention learns where to look.

Tasks: the first tutorial's Seq2Seq with Bahdanau attention (dates, reversal: the snapshot is the alignment) or the
"it" page's encoder (the snapshot is the attention from "it"). A run starts only on the button, goes through the
server's queue (serving.training_queue: one at a time, identical trainings shared) and stays in the session.
"""
from __future__ import annotations

import streamlit as st

from attention_core.labs import training as lab
from attention_core.models import recipes, trainer
from attention_core.models.pronoun import pronoun_loss
from attention_core.models.seq2seq import seq2seq_loss
from ui import anatomy, live_run, presenter
from ui import format as fmt
from ui import training_sections as sec
from ui.i18n import lesson, t

NS = "training"
# one equation a row: a phone (358 px) shows it without scrolling sideways
FORMULA = (r"\begin{gathered}\mathcal{L} = -\frac{1}{T}\sum_{t=1}^{T}\log p_\theta\big(y_t \mid y_{<t},\, x\big)\\[6pt]"
           r"\eta_s = \eta\cdot\begin{cases}\dfrac{s+1}{w} & s < w\\[4pt]"
           r"\tfrac12\big(1+\cos\big(\pi\,\frac{s-w}{S-1-w}\big)\big) & s \ge w\end{cases}\end{gathered}\,")


# ------------------------------------------------------------------ the run (only on the button; in the server's queue)
LIVE = live_run.LiveRun(NS, "_train_ticket", sec.job, sec.keep, sec.draw_live, progress=sec.progress_text,
                        usable=sec.has_snapshots, again=sec.trained_before)


# ------------------------------------------------------------------ the page
def trained_code() -> tuple:
    """The trainer and a task's loss run in the queue's worker: listed once a run of this session has finished."""
    trained = {r.settings.task for r in sec.runs()}
    fit = (trainer.TransformerTrainer.fit, trainer.TransformerTrainer.train_step) if trained else ()
    fit += ((pronoun_loss,) if "pronoun" in trained else ()) + ((seq2seq_loss,) if trained - {"pronoun"} else ())
    return (recipes.live_run, *fit)


# The run's settings, the question they set and the Train button run as an st.fragment (redraw budget): a control (the
# seed too) redraws only this part, not the lesson, the kept runs or the pitfalls.
def run_part() -> lab.RunSettings | None:
    with lesson_steps.step("controls", keep=True):
        settings = sec.controls()
        task_now = settings.task if settings else None
        st.caption(t(f"{NS}.facts_pronoun" if task_now == "pronoun" else f"{NS}.facts", cap=fmt.fixed(sec.TIME_CAP, 0),
                     lr=sec.LRS.get(task_now, sec.LR), warmup=sec.WARMUP))
    with lesson_steps.step("question"):
        sec.start_exercise(settings)           # before any run: how sharp is attention at step 0?
    with lesson_steps.step("train"):
        sec.train_section(settings, LIVE)      # harvests a run that has finished: the kept runs below follow
    return settings


def drawn_for(settings: lab.RunSettings | None) -> tuple:
    """What the page outside the run's part was drawn for: the schedule pitfall's number of steps, the kept runs."""
    return (settings.steps if settings else sec.STEPS[2]), [r.name for r in sec.runs()]


anatomy.header(NS)
lesson_steps = presenter.Lesson(NS)
with lesson_steps.step("intuition"):
    anatomy.intuition(NS)
    st.markdown(lesson(f"{NS}/run"))
    anatomy.formula(FORMULA, t(f"{NS}.formula_caption"))
settings = lesson_steps.part(run_part, follow=drawn_for)
with lesson_steps.step("results", shows=trained_code()):
    sec.results_section(LIVE)
with lesson_steps.step("pitfalls"):
    sec.pitfalls(settings.steps if settings else sec.STEPS[2])
lesson_steps.end()
