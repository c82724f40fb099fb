"""Caching numeric results without copying them on every read.

``st.cache_data`` pickles a result when it is stored and unpickles a fresh copy on *every* call:
for a page that reads a 12-layer stack of activations several times per rerun, that copying costs
more than computing it. ``shared_arrays`` caches with ``st.cache_resource`` (one object shared by
every session and call) and makes every numpy array in the result read-only first, so a page
that tried to modify a shared result would get an error instead of changing it for everyone.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import streamlit as st


def freeze(value):
    """``value`` with every numpy array in it (in dicts, lists, tuples) made read-only, in place."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif isinstance(value, dict):
        for item in value.values():
            freeze(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            freeze(item)
    return value


def shared_arrays(max_entries: int = 32) -> Callable:
    """Decorator: like ``st.cache_data(max_entries=..., show_spinner=False)`` for functions that return
    numpy arrays (or dicts / lists / tuples of them), without a copy per call; the arrays are read-only."""
    def decorate(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def frozen(*args, **kwargs):
            return freeze(fn(*args, **kwargs))

        return st.cache_resource(max_entries=max_entries, show_spinner=False)(frozen)

    return decorate
