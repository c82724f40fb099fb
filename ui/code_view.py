"""9. "Show the code": the attention_core source that produced the picture. Its own module so that both the
page anatomy and the lesson (``presenter.Lesson.end`` draws it with what the sections declared) use it without
importing each other."""
from __future__ import annotations

import functools
import inspect

import streamlit as st

from .i18n import t


@functools.cache
def _source(obj) -> str:
    return inspect.getsource(obj)


def show_code(*objects, key: str) -> None:
    """9. The attention_core source that produced the picture (the very functions that ran): a page does not call
    this, its lesson does (``presenter.Lesson.end``, with what the sections declared). The source is drawn only
    while the expander is open: syntax-highlighted code is thousands of DOM nodes that every rerun of the page
    would otherwise re-render (the redraw budget, docs/performance.md)."""
    with st.container(key=f"secondary_{key}"):   # hidden in presenter mode
        box = st.expander(t("common.show_code"), icon=":material/code:", key=key, on_change="rerun",
                          bind="query-params")
        if box.open:
            with box:
                for obj in objects:
                    st.caption(f"`{obj.__module__}.{obj.__qualname__}`")
                    st.code(_source(obj), language="python")
