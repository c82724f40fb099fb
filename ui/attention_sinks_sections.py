"""The attention-sinks page's sections: the computations cached on plain arguments, the recorded grid of streaming
losses and the checkpoint's recorded evaluation, and what each part draws (the window controls, question and
pictures, the first-token shares and why a sink helps, one head, the streaming question, explanation and evidence,
the pitfall)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import streamlit as st

from attention_core.labs import attention_sinks as lab
from attention_core.models import attention_sinks_lm as sinks_lm
from serving.cache import MB, cache_data
from ui import anatomy, controls, course, models
from ui.attention_sinks_charts import (
    METHOD_COLORS,
    NEVER_COLOR,
    REACH_COLORS,
    loss_frame,
    loss_lines,
    mask_frame,
    method_bars,
    method_frame,
    reach_frame,
    reach_grid,
)
from ui.charts import attention_heatmap, heatmap, heatmap_height
from ui.format import fixed, pct
from ui.i18n import t

NS = "attention_sinks"
METHODS = sinks_lm.STREAM_METHODS            # dense, window, sinks, sinks_original, recompute
CACHES, LENGTHS = lab.CACHES, lab.LENGTHS
GRID_SHOWN = "assets/models/sinks_lm_streams.json"
COMMAND = f"python -m attention_core.models {lab.RECIPE}"
DEMO_SCORES = (4.0, 0.3, 0.1, 0.0, -0.2, 0.2)
MASK_COLORS = ("#21918c", "#e66101", "#eeeeee")     # seen in the window, seen as a sink, hidden


class Window(NamedTuple):
    n: int
    window: int
    layers: int
    sinks: int


# ------------------------------------------------------------------ computation: cached on plain arguments
@cache_data(max_entries=64, max_bytes=2 * MB)
def field(n: int, window: int, layers: int, sinks: int) -> lab.ReceptiveField:
    return lab.receptive_field(n, window, layers, sinks)


@cache_data(max_entries=64, max_bytes=2 * MB)
def reach_data(n: int, window: int, layers: int, sinks: int, labels: tuple[str, ...], never: str):
    return reach_frame(field(n, window, layers, sinks).first_layer, labels, never)


@cache_data(max_entries=64, max_bytes=2 * MB)
def mask_data(n: int, window: int, layers: int, sinks: int, states: tuple[str, ...]):
    return mask_frame(n, window, sinks, states)


@cache_data(max_entries=16, max_bytes=8 * MB)
def view(seed: int, stamp: float) -> lab.HeadView:
    return lab.head_view(models.shipped_model(lab.RECIPE).model, seed)


@cache_data(max_entries=32, max_bytes=1 * MB)
def live_check(seed: int, cache: int, stamp: float) -> lab.StreamCheck:
    return lab.token_by_token_check(models.shipped_model(lab.RECIPE).model, seed, cache)


@cache_data(max_entries=2, max_bytes=1 * MB)
def _grid(path: str, stamp: tuple[int, int], train_seconds, loss):
    try:
        return lab.read_grid(path, {"train_seconds": train_seconds, "eval": {"loss": loss}})
    except FileNotFoundError:
        return models.Unavailable(GRID_SHOWN, True, lab.GRID_COMMAND)
    except Exception as err:          # damaged, or recorded on another checkpoint: JSON, UTF-8 or content errors
        return models.Unavailable(GRID_SHOWN, False, lab.GRID_COMMAND, models.why_of(err, lab.GRID_FILE))


def recorded_grid(meta: dict):
    """The recorded losses of every cache size x length (dict), or Unavailable; read again when the file or the
    checkpoint changes."""
    try:
        s = lab.GRID_FILE.stat()
    except OSError:
        return models.Unavailable(GRID_SHOWN, True, lab.GRID_COMMAND)
    ev = meta.get("eval", {})
    return _grid(str(lab.GRID_FILE), (s.st_mtime_ns, s.st_size), meta.get("train_seconds"), ev.get("loss"))


def recorded(meta: dict) -> dict | None:
    """The checkpoint's recorded evaluation, or None (with a message) when it lacks what the page quotes."""
    ev = meta.get("eval", {}) if isinstance(meta, dict) else {}
    stream = ev.get("stream", {}) if isinstance(ev, dict) else {}
    if not ({"first_share", "first4_share", "uniform_first_share", "loss"} <= set(ev)
            and set(METHODS) <= set(stream.get("loss", {})) and set(METHODS) <= set(stream.get("loss_by_bin", {}))):
        models.show_unavailable(models.Unavailable(f"assets/models/{lab.RECIPE}.pt", False, COMMAND,
                                                   models.Why("no_eval")))
        return None
    return ev


def method_labels() -> list[str]:
    return [t(f"{NS}.method_{m}") for m in METHODS]


# ------------------------------------------------------------------ sections, in lesson order
def window_controls() -> Window:
    st.subheader(t(f"{NS}.window_heading"))
    a, b, c, d = st.columns(4)
    with a:
        n = st.slider(t(f"{NS}.ctl_n"), 8, 48, 24, key="n", bind="query-params")
    with b:
        window = st.slider(t(f"{NS}.ctl_window"), 1, 12, 4, key="window", bind="query-params")
    with c:
        layers = st.slider(t(f"{NS}.ctl_layers"), 1, 6, 3, key="layers", bind="query-params")
    with d:
        sinks = st.slider(t(f"{NS}.ctl_sinks"), 0, 4, 0, key="sinks", bind="query-params")
    return Window(int(n), int(window), int(layers), int(sinks))


def window_question(w: Window) -> None:
    w1 = w.window - 1
    anatomy.exercise(f"{NS}_ex", t(f"{NS}.ex_question", W=w.window, L=w.layers),
                     [t(f"{NS}.ex_a", a=w1), t(f"{NS}.ex_b", b=w.layers * w1), t(f"{NS}.ex_c", c=w.layers * w.window)],
                     answer=1, explanation=t(f"{NS}.ex_explain"))


def window_evidence(w: Window) -> None:
    states = [t(f"{NS}.mask_window"), t(f"{NS}.mask_sink"), t(f"{NS}.mask_hidden")]
    anatomy.show_chart(reach_grid(mask_data(*w, tuple(states)), x_title=t("common.key"), y_title=t("common.query"),
                                  reach_title=t(f"{NS}.mask_value"), levels=states, colors=list(MASK_COLORS),
                                  height=heatmap_height(w.n), title=t(f"{NS}.mask_title", n=w.n, W=w.window,
                                                                       s=w.sinks)), key="mask")
    levels = [t(f"{NS}.reach_layer_1")] + [t(f"{NS}.reach_layer", l=k) for k in range(2, w.layers + 1)]
    never = t(f"{NS}.reach_never", L=w.layers)
    frame = reach_data(*w, tuple(levels), never)
    anatomy.show_chart(reach_grid(frame, x_title=t(f"{NS}.axis_input"), y_title=t(f"{NS}.axis_output"),
                                  reach_title=t(f"{NS}.axis_reach"), levels=levels + [never],
                                  colors=list(REACH_COLORS[:w.layers]) + [NEVER_COLOR],
                                  height=heatmap_height(w.n), title=t(f"{NS}.reach_title", L=w.layers)), key="reach")
    st.caption(t(f"{NS}.reach_caption"))
    r = field(*w)
    rule = lab.span_rule(w.window, w.layers)
    items = []
    if w.sinks == 0:
        key = "notice_reach" if rule <= w.n - 1 else "notice_reach_capped"
        items.append(t(f"{NS}.{key}", L=w.layers, i=w.n - 1, far=r.farthest[-1], w1=w.window - 1, rule=rule))
        items.append(t(f"{NS}.notice_layers", reach=" → ".join(str(f) for f in r.farthest), w1=w.window - 1))
    else:
        items.append(t(f"{NS}.notice_sinks", s=w.sinks))
        items.append(t(f"{NS}.notice_layers", reach=" → ".join(
            str(w.n - 1 - int(np.flatnonzero(r.reach[k, w.n - 1, w.sinks:]).min()) - w.sinks)
            for k in range(w.layers)), w1=w.window - 1))
    anatomy.notice(items)


def has_sink(share: np.ndarray, uniform: float) -> bool:
    """A head parks on the first token: it gives it at least 30 % of its weight, 5 times an even spread."""
    return bool(((share >= 0.3) & (share >= 5 * uniform)).any())


def sinks_section(lm, ev: dict) -> tuple[int, int]:
    st.subheader(t(f"{NS}.sinks_heading"))
    cfg, meta = lm.config, lm.meta
    st.markdown(t(f"{NS}.sinks_intro", L=cfg["num_layers"], h=cfg["num_heads"], d=cfg["d_model"],
                  steps=meta.get("recipe", {}).get("steps", "?"), seconds=fixed(meta.get("train_seconds", 0), 0),
                  n=ev.get("train_len", sinks_lm.TRAIN_LEN), loss=fixed(ev["loss"], 3)))
    share = np.asarray(ev["first_share"], dtype=float)
    layers, heads = share.shape
    rows = [t(f"{NS}.layer_label", l=k + 1) for k in range(layers)]
    cols = [t(f"{NS}.head_label", h=k + 1) for k in range(heads)]
    anatomy.show_chart(heatmap(share, rows, cols, selectable=False, x_title=t(f"{NS}.axis_head"),
                               y_title=t(f"{NS}.axis_layer"), value_title=t(f"{NS}.axis_share"),
                               title=t(f"{NS}.share_title")), key="share")
    uniform = ev["uniform_first_share"]
    st.caption(t(f"{NS}.share_caption", start=ev.get("share_from", sinks_lm.SHARE_FROM),
                 end=ev.get("train_len", sinks_lm.TRAIN_LEN) - 1, seqs=ev.get("eval_seqs", "?"),
                 uniform=fixed(uniform, 3)))
    best = np.unravel_index(int(share.argmax()), share.shape)
    thr = 0.3
    share4 = np.asarray(ev["first4_share"], dtype=float)
    anatomy.notice([
        t(f"{NS}.notice_share", k=int((share > thr).sum()), total=share.size, thr=pct(thr, 0),
          uniform=fixed(uniform, 3), max=fixed(float(share.max()), 3), l=best[0] + 1, h=best[1] + 1),
        t(f"{NS}.notice_first4", s4=fixed(float(share4[best]), 3), u4=fixed(ev.get("uniform_first4_share", 0), 3)),
        t(f"{NS}.notice_layers_share", per_layer=" · ".join(fixed(float(x), 3) for x in share.max(1))),
        t(f"{NS}.verdict_sink" if has_sink(share, uniform) else f"{NS}.verdict_none",
          ratio=fixed(float(share.max()) / uniform, 1)),
    ])
    return int(best[0]), int(best[1])


def why_section(layer: int, head: int, v: lab.HeadView) -> None:
    st.markdown(f"**{t(f'{NS}.why_heading')}**")
    st.markdown(t(f"{NS}.why_body"))
    w = lab.softmax_row(DEMO_SCORES)
    st.markdown(t(f"{NS}.why_demo", scores=", ".join(fixed(s, 1) for s in DEMO_SCORES),
                  weights=", ".join(fixed(x, 3) for x in w), first=fixed(w[0], 3), rest=fixed(1 - w[0], 3),
                  ratio=fixed(float(v.value_ratio[layer, head]), 2)))


def head_controls(lm, best: tuple[int, int]) -> tuple[int, int, int]:
    cfg = lm.config
    a, b, c = st.columns([2, 2, 1])
    with a:
        layer = st.selectbox(t(f"{NS}.ctl_layer"), list(range(1, cfg["num_layers"] + 1)), index=best[0],
                             key="layer", bind="query-params")
    with b:
        head = st.selectbox(t(f"{NS}.ctl_head"), list(range(1, cfg["num_heads"] + 1)), index=best[1],
                            key="head", bind="query-params")
    with c:
        seed = controls.seed()
    return int(layer) - 1, int(head) - 1, seed


def head_evidence(layer: int, head: int, v: lab.HeadView) -> None:
    w = v.weights[layer, head]
    anatomy.show_chart(attention_heatmap(w, v.tokens, selectable=False,
                                         title=t(f"{NS}.head_title", l=layer + 1, h=head + 1, n=len(v.tokens))),
                       key="head_map")
    st.caption(t(f"{NS}.head_caption", share=fixed(float(v.first_share[layer, head]), 3),
                 start=sinks_lm.SHARE_FROM))


ASKED = ("dense", "window", "sinks")          # the methods the streaming question offers, in its order


def stream_question(ev: dict) -> None:
    """Which of dense / window / window + sinks loses most: the answer is the recorded one, not assumed."""
    s = ev["stream"]
    worst = max(ASKED, key=lambda m: s["loss"][m])
    anatomy.exercise(f"{NS}_ex2", t(f"{NS}.ex2_question", T=s["long_len"], times=s["long_len"] // ev["train_len"],
                                    cache=s["cache"]),
                     [t(f"{NS}.ex2_{m}") for m in ASKED], answer=ASKED.index(worst),
                     explanation=t(f"{NS}.ex2_explain_{worst}", T=s["long_len"], train=ev["train_len"],
                                   cache=s["cache"]))


def stream_explained(cache: int, T: int, train: int, sinks: int) -> None:
    st.markdown(t(f"{NS}.stream_intro", cache=cache))
    labels = dict(zip(METHODS, method_labels()))
    st.markdown("\n".join([
        "- " + t(f"{NS}.explain_dense", label=labels["dense"], T=T, train=train),
        "- " + t(f"{NS}.explain_window", label=labels["window"], cache=cache),
        "- " + t(f"{NS}.explain_sinks", label=labels["sinks"], s=sinks, w=cache - sinks, c1=cache - 1),
        "- " + t(f"{NS}.explain_sinks_original", label=labels["sinks_original"]),
        "- " + t(f"{NS}.explain_recompute", label=labels["recompute"], cache=cache, c1=cache - 1),
    ]))


def stream_evidence(ev: dict) -> None:
    s, labels = ev["stream"], method_labels()
    loss = s["loss"]
    anatomy.show_chart(method_bars(method_frame(loss, METHODS, labels, "window"), x_title=t(f"{NS}.axis_loss"),
                                   y_title=t(f"{NS}.axis_method"), order=labels,
                                   title=t(f"{NS}.recorded_title", T=s["long_len"])), key="recorded")
    frame = loss_frame(s["loss_by_bin"], METHODS, labels, s["bin"])
    anatomy.show_chart(loss_lines(frame, x_title=t(f"{NS}.axis_position"), y_title=t(f"{NS}.axis_loss"),
                                  method_title=t(f"{NS}.axis_method"), rule_title=t(f"{NS}.rule_title"),
                                  methods=labels, colors=list(METHOD_COLORS), train_len=int(ev["train_len"]),
                                  title=t(f"{NS}.lines_title", bin=s["bin"])), key="lines")
    st.caption(t(f"{NS}.recorded_caption", command=COMMAND, seqs=s["seqs"], T=s["long_len"],
                 times=s["long_len"] // ev["train_len"], train=ev["train_len"], cache=s["cache"], bin=s["bin"]))
    by = s["loss_by_bin"]
    anatomy.notice([
        t(f"{NS}.notice_eviction", cache=s["cache"], window=fixed(loss["window"], 3), sinks=fixed(loss["sinks"], 3),
          diff=fixed(loss["window"] - loss["sinks"], 3)),
        t(f"{NS}.eviction_small" if abs(loss["window"] - loss["sinks"]) < 0.02 else f"{NS}.eviction_large",
          heads=int(((np.asarray(ev["first_share"]) >= 0.3)
                     & (np.asarray(ev["first_share"]) >= 5 * ev["uniform_first_share"])).sum())),
        t(f"{NS}.notice_dense", T=s["long_len"], dense=fixed(loss["dense"], 3), recompute=fixed(loss["recompute"], 3),
          cost=s["cache"]),
        t(f"{NS}.notice_original", original=fixed(loss["sinks_original"], 3), sinks=fixed(loss["sinks"], 3)),
        t(f"{NS}.notice_along", bin=s["bin"], w0=fixed(by["window"][0], 3), w1=fixed(by["window"][-1], 3),
          s0=fixed(by["sinks"][0], 3), s1=fixed(by["sinks"][-1], 3)),
    ])


def pitfall_section(ev: dict) -> None:
    loss = ev["stream"]["loss"]
    anatomy.pitfall(t(f"{NS}.pit_title"), t(f"{NS}.pit_body"), code=t(f"{NS}.pit_code"),
                    demo=lambda: st.markdown(t(f"{NS}.pit_demo", original=fixed(loss["sinks_original"], 3),
                                               sinks=fixed(loss["sinks"], 3))))
    course.builds_on("kv_cache")       # the pitfall's cache is the one the generation page builds
