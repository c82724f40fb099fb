"""The shipped files pages read (trained checkpoints, recorded curves, recorded benchmarks), loaded once per
server process and shared by every page and session, and the one message a page shows when one of them is
missing or damaged: which file, what is wrong, and the command that rebuilds it.

Each loader is keyed by the file's path, modification time and size: a rebuilt file is read again without
restarting the server, and a damaged one is diagnosed once, not on every rerun.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import streamlit as st

import attention_core.models.recipes as train
from attention_core.labs import efficiency_bench as bench_core
from attention_core.models.recipes import DamagedFile, LoadedModel
from ui.anatomy import md_escape, problem
from ui.i18n import Unreadable, Why, why_of  # noqa: F401 (why_of: the pages' own readers use it from here)
from ui.registry import ROOT

BENCH_DIR = ROOT / "assets" / "bench"        # read at call time, so tests can point it elsewhere
BENCH_FILE, LRA_FILE = "efficient.json", "lra_table2.csv"
# what the efficiency page quotes from the recorded benchmark (a --quick run or a cut file lacks some)
BENCH_KEYS = ("machine", "settings", "results", "slopes", "wall_s")
BENCH_SLOPES = ("full", "linear", "window", "sparse_masked", "linformer", "performer", "flash")
# the sizes the page quotes are found in the data (efficiency_bench.quoted_sizes): any run with these will do;
# a run lacking one is reported with common.why_bench_<field>
BENCH_QUOTED = ("top", "memory", "masked", "doubling")


class Unavailable(NamedTuple):
    """Why a shipped file cannot be used, in the words the learner's message needs."""
    file: str          # where it lives in the repository, e.g. assets/models/dates.pt (never a server path)
    missing: bool      # True: not there; False: there but unreadable
    command: str       # what rebuilds (or restores) it, run in the app's folder
    detail: Why | str = ""   # why it cannot be used: a Why (said in the learner's language when shown), or a
                             # line already in the learner's language


def _files() -> dict[str, tuple[Path, str, str]]:
    """key -> (path now, path as shown, command that rebuilds it)."""
    out = {name: (train.checkpoint_path(name), f"assets/models/{name}.pt", f"python -m attention_core.models {name}")
           for name in train.TASKS}
    out["curves"] = (Path(train.MODELS_DIR) / train.CURVES_FILE, f"assets/models/{train.CURVES_FILE}",
                     "python -m attention_core.models curves")
    out["ablation"] = (Path(train.MODELS_DIR) / train.ABLATION_FILE, f"assets/models/{train.ABLATION_FILE}",
                       "python scripts/pronoun_readout_ablation.py")
    out["bench"] = (Path(BENCH_DIR) / BENCH_FILE, f"assets/bench/{BENCH_FILE}",
                    "python -m attention_core.labs.efficiency_bench")
    out["lra"] = (Path(BENCH_DIR) / LRA_FILE, f"assets/bench/{LRA_FILE}", f"git checkout -- assets/bench/{LRA_FILE}")
    return out


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        s = path.stat()
    except OSError:
        return None
    return s.st_mtime_ns, s.st_size


def _read_bench(path: Path) -> dict:
    doc = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not all(k in doc for k in BENCH_KEYS):
        lacking = [k for k in BENCH_KEYS if not isinstance(doc, dict) or k not in doc]
        raise Unreadable(Why("fields", (("fields", ", ".join(lacking)),)))
    if not isinstance(doc["slopes"], dict) or not isinstance(doc["results"], list):
        raise Unreadable(Why("content", note="slopes is not an object or results not a list"))
    lacking = [m for m in BENCH_SLOPES if not {"time_slope", "memory_slope"} <= set(doc["slopes"].get(m, {}))]
    if lacking:
        raise Unreadable(Why("no_slopes", (("methods", ", ".join(lacking)),)))
    if not all(isinstance(r, dict) and isinstance(r.get("n"), int) for r in doc["results"]):
        raise Unreadable(Why("no_size"))
    sizes = bench_core.quoted_sizes(doc)
    lacking = [field for field in BENCH_QUOTED if getattr(sizes, field) is None]
    if lacking:
        raise Unreadable(Why(f"bench_{lacking[0]}"))
    return doc


def _read_lra(path: Path) -> list[dict]:
    rows = bench_core.lra_reference(path)
    if not rows:
        raise Unreadable(Why("no_rows"))
    return rows


ABLATION_RUN = ("readout", "seed", "steps", "accuracy", "best_encoder_head", "best_encoder_head_fraction")


def _read_ablation(path: Path) -> dict:
    record = train.load_readout_ablation(path.parent)
    if not isinstance(record, dict) or not isinstance(record.get("runs"), list) or not all(
            isinstance(r, dict) and all(k in r for k in ABLATION_RUN) for r in record["runs"]):
        raise ValueError(f"not a recorded ablation (runs of {', '.join(ABLATION_RUN)})")
    return record


_READERS = {"curves": lambda path: train.load_curves(path.parent), "ablation": _read_ablation,
            "bench": _read_bench, "lra": _read_lra}


def _load(key: str, path: Path, shown: str, command: str):
    """The file's content, or Unavailable; never raises for a missing or unreadable file."""
    try:
        if key in _READERS:
            return _READERS[key](path)
        return train.load_model(key, path.parent)
    except FileNotFoundError:
        return Unavailable(shown, True, command)
    except Exception as err:       # DamagedFile; a damaged bench file: JSON, CSV or UTF-8 errors, missing columns ...
        return Unavailable(shown, False, command, why_of(err, path))


@st.cache_resource(show_spinner=False, max_entries=32)
def _cached(key: str, path: str, stamp: tuple[int, int], shown: str, command: str):
    return _load(key, Path(path), shown, command)


def load(key: str):
    """A shipped file's content (LoadedModel for a checkpoint, dict for curves/bench, rows for lra) or
    Unavailable. ``key`` is a checkpoint name (train.TASKS), "curves", "ablation", "bench" or "lra"."""
    path, shown, command = _files()[key]
    stamp = _stamp(path)
    if stamp is None:
        return Unavailable(shown, True, command)
    return _cached(key, str(path), stamp, shown, command)


def show_unavailable(u: Unavailable) -> None:
    """The learner's message for one missing or damaged file, with the command that rebuilds it."""
    if u.missing:
        problem("common.file_missing", file=u.file, command=u.command)
    else:
        detail = u.detail.text() if isinstance(u.detail, Why) else md_escape(u.detail)
        problem("common.file_damaged", file=u.file, command=u.command, detail=detail)


def unavailable(*keys: str) -> bool:
    """Show the message for each of these files that is missing or damaged; True if any was."""
    bad = [u for u in map(load, keys) if isinstance(u, Unavailable)]
    for u in bad:
        show_unavailable(u)
    return bool(bad)


def shipped_model(name: str) -> LoadedModel:
    """assets/models/<name>.pt in eval mode; raises FileNotFoundError or train.DamagedFile if it cannot be
    used (check with ``unavailable(name)`` first)."""
    got = load(name)
    if isinstance(got, Unavailable):
        if got.missing:
            raise FileNotFoundError(got.file)
        why = got.detail if isinstance(got.detail, Why) else Why("content", note=str(got.detail))
        raise DamagedFile(Path(got.file), got.command, why.text("en"), why.code, dict(why.facts))
    return got


def model(name: str) -> LoadedModel | None:
    """Like shipped_model, but None when the checkpoint is missing or damaged (``unavailable`` says so)."""
    got = load(name)
    return None if isinstance(got, Unavailable) else got


def curves() -> dict:
    """The recorded accuracy curves (assets/models/curves.json); {} if missing or damaged."""
    got = load("curves")
    return {} if isinstance(got, Unavailable) else got


def readout_ablation() -> dict | None:
    """The pronoun model's recorded readout ablation (assets/models/pronoun_ablation.json); None if missing
    or damaged."""
    got = load("ablation")
    return None if isinstance(got, Unavailable) else got


def bench() -> dict | None:
    """The recorded benchmark (assets/bench/efficient.json); None if missing, damaged or incomplete.
    Shared by every session: read it, never change it."""
    got = load("bench")
    return None if isinstance(got, Unavailable) else got


def lra() -> list[dict] | None:
    """The Long Range Arena reference rows (assets/bench/lra_table2.csv); None if missing or damaged."""
    got = load("lra")
    return None if isinstance(got, Unavailable) else got
