"""The first minutes of a server: every session runs through the router, and the pages' modules are imported once.

A class opens its links together on a server that has just started. Two things broke that on a fresh replica
(1 round in 4 of tests/test_serving.py's start, an ImportError from a partially initialised module on a page):
- Streamlit treats a `pages/` folder next to the entry point as a legacy (v1) multipage app until the first
  `st.navigation` call of the process, and ran a deep link's page file directly, without app.py;
- the pages' imports ran concurrently in several sessions' threads, which Python's import locks do not make safe.
The pages now live in app_pages/ and the router imports every module a page imports before any page runs
(serving.preload.import_page_modules). These tests check both statically, then start real servers and open every page
in both languages at once as their first sessions.
"""
import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap

from deploy.loadcheck import Client, free_ports, page_paths
from scripts.server import wait_healthy

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("attention_core", "ui")
ROUNDS = 2              # fresh servers; before the fix about 1 in 4 showed the race


def test_no_legacy_pages_folder_next_to_either_entry_point():
    """Streamlit's own check (PagesManager, at a session's start) finds no v1 `pages/` folder, so every session
    runs the router: `streamlit run app.py` locally and cloud/streamlit_app.py on Community Cloud."""
    from streamlit.runtime.pages_manager import PagesManager

    saved = PagesManager.uses_pages_directory
    try:
        for entry in (ROOT / "app.py", ROOT / "cloud" / "streamlit_app.py"):
            PagesManager.uses_pages_directory = None
            PagesManager(str(entry))
            assert PagesManager.uses_pages_directory is False, f"{entry.name}: Streamlit sees a v1 pages/ folder"
    finally:
        PagesManager.uses_pages_directory = saved
    assert not (ROOT / "pages").exists()
    assert sorted(p.name for p in (ROOT / "app_pages").glob("*.py"))


def test_the_router_preloads_every_module_a_page_imports():
    """In a new interpreter: after import_page_modules(), running every import statement of every page file, and
    of every module of this repository then loaded (those inside functions included, relative ones in their
    package), loads no further module of this repository. A module the preload missed would be imported by a
    page's thread, perhaps while another thread imports it too."""
    code = textwrap.dedent("""
        import ast, json, sys
        from serving.preload import import_page_modules
        from ui.registry import available_pages
        ours = lambda: {m for m in sys.modules if m.split(".")[0] in ("attention_core", "serving", "ui")}
        import_page_modules()
        before = ours()

        def run_imports(path, package):
            tree = ast.parse(open(path, encoding="utf-8").read())
            imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
            exec(compile(ast.Module(body=imports, type_ignores=[]), path, "exec"),
                 {"__name__": f"{package}._probe" if package else "_probe", "__package__": package})

        for spec in available_pages():
            run_imports(str(spec.file), None)
        for name in sorted(before):
            module = sys.modules[name]
            if getattr(module, "__file__", None):
                run_imports(module.__file__, module.__spec__.parent)
        print(json.dumps({"before": sorted(before), "new": sorted(ours() - before)}))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert not result["new"], f"imported by a page or a module but not preloaded: {result['new']}"
    # the preload is the pages' whole dependency set: every lab and every chart module of a registered page
    from ui.registry import available_pages
    for spec in available_pages():
        if (ROOT / "attention_core" / "labs" / f"{spec.key}.py").exists():
            assert f"attention_core.labs.{spec.key}" in result["before"], spec.key
        if (ROOT / "ui" / f"{spec.key}_charts.py").exists():
            assert f"ui.{spec.key}_charts" in result["before"], spec.key
    assert {"serving.cache", "serving.url_guard"} <= set(result["before"])   # the server's package is preloaded too


def test_page_imports_reads_a_page_file(tmp_path):
    from serving.preload import page_imports

    page = tmp_path / "p.py"
    page.write_text("import math\nfrom attention_core.labs import qkv\nfrom ui import charts, format as fmt\n"
                    "def f():\n    import serving.cache\n    from attention_core.masks import causal_mask\n",
                    encoding="utf-8")
    assert page_imports(page) == ["attention_core.labs", "attention_core.labs.qkv", "ui", "ui.charts",
                                  "ui.format", "serving.cache", "attention_core.masks"]
    # relative imports, resolved in the module's package (as attention_core/labs/efficiency.py's lazy one)
    lab = tmp_path / "lab.py"
    lab.write_text("from .efficiency_bench import _make_call\nfrom .. import masks, efficient\n"
                   "from ..models import recipes\nfrom . import qkv\n", encoding="utf-8")
    assert page_imports(lab, "attention_core.labs") == [
        "attention_core.labs.efficiency_bench", "attention_core", "attention_core.masks", "attention_core.efficient",
        "attention_core.models", "attention_core.models.recipes", "attention_core.labs", "attention_core.labs.qkv"]
    assert page_imports(lab) == []          # a page file has no package: its relative imports are not followed


async def _first_sessions(base: str, pages: list[str]) -> list[str]:
    """Every page in both languages, all requested at once: the server's first sessions."""
    async def one(path: str, lang: str) -> list[str]:
        client = Client(base, lang)
        try:
            await client.get(f"/{path}?lang={lang}")
            await client.connect()
            await client.run_page(path)
        except Exception as e:       # a lost connection or a timeout is an error of this session
            client.errors.append(f"page {path!r} ({lang}): {type(e).__name__}: {e}")
        finally:
            await client.close()
        return client.errors

    runs = await asyncio.wait_for(asyncio.gather(*(one(p, lang) for p in pages for lang in ("en", "zh"))), 600)
    return [e for errors in runs for e in errors]


def test_a_fresh_server_serves_every_page_to_its_first_sessions_at_once(tmp_path):
    """deploy/run-replica.sh (what a school runs); after its health check, every page in both languages is
    opened at once, ROUNDS times on a new server: no exception on any page, every page drawn, no traceback in
    the server's log."""
    pages = page_paths()
    for round_ in range(ROUNDS):
        port, = free_ports(1)
        log_path = tmp_path / f"server{round_}.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(["sh", str(ROOT / "deploy" / "run-replica.sh"), str(port), "127.0.0.1"],
                                    cwd=ROOT, env={**os.environ, "PYTHON": sys.executable}, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            try:
                wait_healthy(port, proc, timeout=180)
                errors = asyncio.run(_first_sessions(f"http://127.0.0.1:{port}", pages))
                log.flush()
                text = log_path.read_text(errors="replace")     # before the server is stopped
            finally:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
        assert not errors, f"round {round_}: {len(errors)} errors, e.g. {errors[:4]}\n{text[-3000:]}"
        assert "Traceback" not in text, text[-3000:]
