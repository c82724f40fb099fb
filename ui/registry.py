"""The pages of the app, in teaching order (the router and the home page's map read this), and the one-time import of
every module they use (import_page_modules, called by the router before any page runs)."""
from __future__ import annotations

import ast
import importlib
import pathlib
import threading
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class PageSpec:
    key: str        # url path and i18n key: nav.<key>, nav.<key>_blurb
    section: str    # i18n key nav.section_<section>
    icon: str
    core: bool = True   # on the core path (home's "start here" and the course line); False: optional, beside it
    minutes: int = 10   # an estimate of the time a learner needs for the page, exercise and pitfall included

    @property
    def path(self) -> str:
        """Relative to the repository root (what AppTest.switch_page takes)."""
        return f"app_pages/{self.key}.py"

    @property
    def file(self) -> pathlib.Path:
        """Absolute, so the app also runs from another entry point (cloud/streamlit_app.py)."""
        return ROOT / self.path


SECTIONS = ("start", "why", "foundations", "transformer", "learned", "efficiency", "modern", "review", "teach")

# The order of the tutorials' narrative: why attention (the fixed vector of Seq2Seq is a bottleneck, and additive
# attention its fix), then Q, K, V with their scaling and masks, the Transformer's parts, what trained models learn,
# efficient attention, today's LLMs (each of those pages leans on the KV cache or RoPE seen before it), the review.
# The navigation, the home page's map and the pages' previous / next links all follow it, section by section.
PAGES: tuple[PageSpec, ...] = (
    PageSpec("home", "start", ":material/home:", minutes=3),
    PageSpec("bottleneck", "why", ":material/filter_alt:", minutes=10),
    PageSpec("alignment", "why", ":material/translate:", minutes=12),
    PageSpec("qkv", "foundations", ":material/key:", minutes=15),
    PageSpec("scaling", "foundations", ":material/thermostat:", minutes=12),
    PageSpec("masking", "foundations", ":material/visibility_off:", minutes=12),
    PageSpec("multihead", "transformer", ":material/view_module:", minutes=12),
    PageSpec("positional", "transformer", ":material/pin_drop:", minutes=12),
    PageSpec("encoder", "transformer", ":material/layers:", minutes=12),
    PageSpec("cross_attention", "transformer", ":material/compare_arrows:", core=False, minutes=12),
    PageSpec("pronoun", "learned", ":material/psychology:", minutes=10),
    PageSpec("analysis", "learned", ":material/analytics:", core=False, minutes=10),
    PageSpec("pretrained", "learned", ":material/neurology:", core=False, minutes=12),
    PageSpec("training", "learned", ":material/model_training:", core=False, minutes=15),
    PageSpec("efficiency", "efficiency", ":material/speed:", minutes=15),
    PageSpec("kv_cache", "modern", ":material/memory:", minutes=12),
    PageSpec("gqa", "modern", ":material/call_split:", core=False, minutes=12),
    PageSpec("attention_sinks", "modern", ":material/anchor:", core=False, minutes=12),
    PageSpec("long_context", "modern", ":material/straighten:", core=False, minutes=12),
    PageSpec("qk_norm", "modern", ":material/compress:", core=False, minutes=12),
    PageSpec("induction_heads", "modern", ":material/repeat:", core=False, minutes=15),
    PageSpec("summary", "review", ":material/summarize:", minutes=10),
    PageSpec("glossary", "review", ":material/menu_book:", core=False, minutes=5),
    PageSpec("teach", "teach", ":material/school:", core=False, minutes=5),
    PageSpec("poll", "teach", ":material/how_to_vote:", core=False, minutes=5),   # students join a room here
)


def spec_of(key: str) -> PageSpec | None:
    """The registered page ``key`` (None for an unknown key)."""
    return next((p for p in PAGES if p.key == key), None)


def available_pages() -> list[PageSpec]:
    """Only pages whose file exists are registered: the app never links to a stub."""
    return [p for p in PAGES if p.file.exists()]


# ------------------------------------------------------------------------------ the pages' modules, loaded once

PACKAGES = ("attention_core", "ui")      # this repository's packages: what a page imports from them is preloaded
_PRELOAD_LOCK = threading.Lock()
_preloaded = False


def imported_modules(path: pathlib.Path, package: str | None = None) -> list[str]:
    """Every module the file at `path` imports (anywhere in it, function bodies too), in source order, relative
    imports resolved in `package` (the file's package; without one they are skipped). `from a.b import c` names
    `a.b`, and `a.b.c` too when that is a module of this repository (`from attention_core.labs import qkv`)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if not package:
                    continue
                parts = package.split(".")
                module = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found = [module] + [f"{module}.{alias.name}" for alias in node.names
                                if _is_module(f"{module}.{alias.name}")]
        else:
            continue
        names += [n for n in found if n not in names]
    return names


def page_imports(path: pathlib.Path, package: str | None = None) -> list[str]:
    """The modules of this repository (``PACKAGES``) that the file at `path` imports: ``imported_modules``'s."""
    return [n for n in imported_modules(path, package) if n.split(".")[0] in PACKAGES]


def _is_module(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def import_page_modules() -> None:
    """Import, once per process and in one thread, every module of this repository that a page imports, and
    every module of this repository those modules import (at their top or inside a function).

    The router calls this before any page runs. Several sessions starting together on a fresh server would
    otherwise import the pages' modules concurrently, and Python's per-module import locks do not make that
    safe: a thread importing `attention_core.labs.qkv` does not wait for another thread still running
    `attention_core/__init__.py` (a parent package found in sys.modules is used as it is), and two threads
    taking the locks of a circular import in opposite orders are let through with a partially initialised
    module. Either way a learner's page failed with an ImportError (seen in tests/test_serving.py). Here the
    first session imports everything while the others wait on the lock; later runs return at once."""
    global _preloaded
    if _preloaded:
        return
    with _PRELOAD_LOCK:
        if _preloaded:
            return
        todo = list(PACKAGES) + [name for spec in available_pages() for name in page_imports(spec.file)]
        done: set[str] = set()
        while todo:                  # and what those modules import, also inside functions: the whole closure
            name = todo.pop(0)
            if name in done:
                continue
            module = importlib.import_module(name)
            done.add(name)
            if getattr(module, "__file__", None):
                todo += page_imports(pathlib.Path(module.__file__), module.__spec__.parent)
        _preloaded = True
