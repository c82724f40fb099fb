"""The one-time import, at server start, of every module of this repository that a page uses (import_page_modules,
called by the router before any page runs), and the reading of a file's imports it rests on."""
from __future__ import annotations

import ast
import importlib
import pathlib
import threading

from ui.registry import ROOT, available_pages

# this repository's packages: what a page imports from them is preloaded
PACKAGES = ("attention_core", "serving", "ui")
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
