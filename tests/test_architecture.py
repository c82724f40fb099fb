"""The layout shows the architecture: keep the layers honest."""
import ast
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def imported_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_attention_core_is_torch_and_numpy_only():
    forbidden = {"streamlit", "altair", "pandas", "ui", "serving", "matplotlib", "seaborn", "requests", "transformers"}
    for path in (ROOT / "attention_core").rglob("*.py"):
        assert not imported_modules(path) & forbidden, f"{path.name} imports {imported_modules(path) & forbidden}"


LIBRARY = {"__init__", "types", "functional", "masks", "modules", "efficient", "positional", "transformer",
           "diagnostics", "analysis", "crossmodal", "text", "decoder", "latent", "streaming", "pretrained"}
LAB_EXTRAS = {"seed_bugs", "efficiency_bench"}       # not a page: the tutorials' bugs, the benchmark CLI
UI_AND_PLOTTING = {"streamlit", "altair", "pandas", "ui"}


def absolute_imports(path: pathlib.Path, package: str) -> set[str]:
    """Every module ``path`` imports, relative imports resolved against ``package`` (dotted): the router's reader."""
    from serving.preload import imported_modules
    return set(imported_modules(path, package))


def reaches(imports: set[str], prefix: str) -> bool:
    return any(m == prefix or m.startswith(prefix + ".") for m in imports)


def test_attention_core_top_level_is_only_the_library():
    core = ROOT / "attention_core"
    files = {p.stem for p in core.glob("*.py")}
    assert files == LIBRARY, f"unexpected: {sorted(files - LIBRARY)}, missing: {sorted(LIBRARY - files)}"
    folders = {p.name for p in core.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == {"models", "labs"}


def test_the_library_imports_no_model_lab_or_ui_code():
    for path in (ROOT / "attention_core").glob("*.py"):
        imports = absolute_imports(path, "attention_core")
        for banned in ("attention_core.models", "attention_core.labs", *UI_AND_PLOTTING):
            assert not reaches(imports, banned), f"attention_core/{path.name} imports {banned}"


def test_models_and_labs_import_no_ui_and_models_no_labs():
    for sub in ("models", "labs"):
        for path in (ROOT / "attention_core" / sub).glob("*.py"):
            imports = absolute_imports(path, f"attention_core.{sub}")
            banned = UI_AND_PLOTTING | ({"attention_core.labs"} if sub == "models" else set())
            for b in banned:
                assert not reaches(imports, b), f"attention_core/{sub}/{path.name} imports {b}"


def test_one_lab_per_page_key():
    """``grep -r <key>`` finds a whole concept: labs are named after the page they serve."""
    from ui.registry import PAGES
    keys = {p.key for p in PAGES}
    labs = {p.stem for p in (ROOT / "attention_core" / "labs").glob("*.py")} - {"__init__"}
    assert labs - LAB_EXTRAS <= keys, f"labs named after no page: {sorted(labs - LAB_EXTRAS - keys)}"
    assert LAB_EXTRAS <= labs
    for key in labs - LAB_EXTRAS:
        assert (ROOT / "app_pages" / f"{key}.py").exists(), key


def test_the_clis_run():
    for module in ("attention_core.models", "attention_core.labs.efficiency_bench"):
        out = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True)
        assert out.returncode == 0 and "usage" in out.stdout, (module, out.stderr[-500:])


def test_ui_chart_builders_do_not_call_streamlit():
    for path in (ROOT / "ui").glob("*charts.py"):
        assert "streamlit" not in imported_modules(path), f"{path.name} must stay a pure chart builder"


def test_importing_attention_core_does_not_pull_streamlit():
    code = "import sys, attention_core; print('streamlit' in sys.modules, 'altair' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install -r requirements.txt && streamlit run app.py" in readme
    assert "pip install -r requirements-dev.txt && python -m pytest" in readme
    assert "pip install -q -r requirements-dev.txt" in ci
    assert ci.strip().splitlines()[-1] == "python -m pytest"


def test_torch_is_pinned_exactly():
    reqs = (ROOT / "requirements.txt").read_text().splitlines()
    assert "torch==2.13.0" in reqs
    cloud = (ROOT / "cloud" / "requirements.txt").read_text().splitlines()
    assert "torch==2.13.0+cpu" in cloud and any("whl/cpu" in line for line in cloud)


def test_app_code_never_opens_the_network():
    network = {"urllib", "requests", "http", "httpx", "socket", "aiohttp", "huggingface_hub", "torchvision"}
    for folder in ("app_pages", "ui", "serving", "attention_core"):
        for path in (ROOT / folder).rglob("*.py"):
            assert not imported_modules(path) & network, f"{path.relative_to(ROOT)} imports a network module"
    app = (ROOT / "app.py")
    assert not imported_modules(app) & network


def test_moved_modules_still_find_the_shipped_assets():
    """models/ and labs/ sit one folder deeper than the modules they came from: their asset paths follow."""
    from attention_core.labs.efficiency_bench import DEFAULT_OUT
    from attention_core.models.recipes import MODELS_DIR
    assert MODELS_DIR == ROOT / "assets" / "models" and (MODELS_DIR / "dates.pt").exists()
    assert DEFAULT_OUT == ROOT / "assets" / "bench" / "efficient.json" and DEFAULT_OUT.exists()


def test_no_import_cycle_among_the_ui_and_serving_modules():
    """A cycle (anatomy <-> url_guard was one) makes the import order matter and hides a layer mix-up. Imports
    inside functions count: they are cycles too, only deferred. ui and serving form one graph: a cycle may cross."""
    from serving.preload import imported_modules

    modules = {f"{pkg}.{p.stem}": p for pkg in ("ui", "serving") for p in (ROOT / pkg).glob("*.py")
               if p.stem != "__init__"}
    graph = {m: {d for d in imported_modules(p, m.split(".")[0]) if d in modules and d != m}
             for m, p in modules.items()}
    state: dict[str, int] = {}

    def visit(m, trail):
        state[m] = 1
        for d in sorted(graph[m]):
            assert state.get(d) != 1, "import cycle: " + " -> ".join(trail + [m, d])
            if d not in state:
                visit(d, trail + [m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


# what a comment or a doc cites must be readable in this repository: the reason itself, or a file of the repository.
# The patterns are built from parts so that this file's own text does not match them.
CITED_ISSUE = re.compile(r"\b[Ii]ssues?" + r" \d+")
OUTSIDE_PATHS = ("DESIGN" + ".md", "../" + "shared", "/" + "work/")
CITING_SCOPE = ("app_pages", "ui", "attention_core", "scripts", "deploy", "cloud", "tests", "docs", ".streamlit",
                "app.py", "README.md")


def scoped_text_files():
    for name in CITING_SCOPE:
        top = ROOT / name
        for path in ([top] if top.is_file() else sorted(top.rglob("*"))):
            if path.is_file() and "__pycache__" not in path.parts:
                try:
                    yield path, path.read_text(encoding="utf-8")
                except UnicodeDecodeError:
                    continue                      # images, checkpoints: nothing to cite


def test_no_file_cites_an_issue_number_or_a_path_outside_the_repository():
    """A reader of the repository has neither the issue tracker's numbering nor the files beside the checkout: a
    comment says why (the redraw budget, a phone's width, the crash it prevents) and points at docs/ for more."""
    found = []
    for path, text in scoped_text_files():
        for number, line in enumerate(text.splitlines(), 1):
            if CITED_ISSUE.search(line) or any(p in line for p in OUTSIDE_PATHS):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    read = {path.relative_to(ROOT).as_posix() for path, _ in scoped_text_files()}
    assert len(read) > 200 and {"app.py", "README.md", "docs/architecture.md", "ui/anatomy.py"} <= read
    assert not found, "\n".join(found)


def test_the_citation_check_sees_what_it_looks_for():
    assert CITED_ISSUE.search("as issue" + " 13 §4 says") and CITED_ISSUE.search("Issues" + " 10 and 11")
    assert not CITED_ISSUE.search("the issue's reproduction") and not CITED_ISSUE.search("tissue" + " 3")
    assert any(p in "see " + "DESIGN" + ".md" for p in OUTSIDE_PATHS)
    assert any(p in "Both tutorials (" + "../" + "shared/seeds/)" for p in OUTSIDE_PATHS)


SERVING = {"__init__", "admission", "cache", "compat", "poll_store", "preload", "training_queue", "url_guard"}
SERVING_MAY_USE_FROM_UI = {"ui.i18n", "ui.format", "ui.registry"}     # leaf modules: messages, formats, the page list


def test_serving_holds_exactly_the_server_machinery():
    assert {p.stem for p in (ROOT / "serving").glob("*.py")} == SERVING
    assert not list((ROOT / "serving").glob("*/"))   # no subpackage hides more
    moved = SERVING - {"__init__", "preload"}
    assert not {p.stem for p in (ROOT / "ui").glob("*.py")} & moved, "a server module is back in ui/"


def test_serving_imports_no_page_nor_plotting_and_only_leaves_of_ui():
    for path in (ROOT / "serving").glob("*.py"):
        names = absolute_imports(path, "serving")
        tops = {n.split(".")[0] for n in names}
        banned = tops & {"app_pages", "altair", "pandas"}
        assert not banned, f"{path.name} imports {banned}"
        from_ui = {n for n in names if n.split(".")[0] == "ui"}
        assert from_ui <= SERVING_MAY_USE_FROM_UI, f"{path.name} imports {from_ui - SERVING_MAY_USE_FROM_UI} from ui"


def test_a_page_file_is_its_lessons_composition_within_350_lines():
    """A page reads as its lesson: the steps in order, the code it shows; section bodies beyond 350 lines live in
    ui/<key>_sections.py. The template shows the whole pattern in under 100 lines."""
    lengths = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in (ROOT / "app_pages").glob("*.py")}
    assert {k: n for k, n in lengths.items() if n > 350} == {}
    assert lengths["template.py"] < 100


def test_a_pages_sections_never_reach_back_into_the_page():
    for path in (ROOT / "ui").glob("*_sections.py"):
        assert not reaches(absolute_imports(path, "ui"), "app_pages"), f"ui/{path.name} imports a page"
        assert (ROOT / "app_pages" / path.name.replace("_sections", "")).exists(), f"ui/{path.name}: no such page"


def code_list_problems(source: str) -> list[str]:
    """What a page or section file does that the lesson framework does for it: drawing "Show the code" itself
    (``show_code(...)``: ``Lesson.end`` draws what the steps declared) or keeping a list of what ran by hand."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name == "show_code":
                problems.append(f"line {node.lineno}: calls show_code (declare with step(shows=...) instead)")
        elif isinstance(node, (ast.FunctionDef, ast.Name)):
            name = node.name if isinstance(node, ast.FunctionDef) else node.id
            if name in {"ran", "code_that_ran", "FULL_RUN", "demo_ran", "pitfall_ran"}:
                problems.append(f"line {node.lineno}: keeps {name} by hand")
    return problems


def test_pages_declare_the_code_they_run_and_keep_no_list_of_it():
    """Every page's "Show the code" is drawn by the lesson (``Lesson.end``) from what its steps, pitfalls and
    sections declared where they ran; no page or section file draws it or keeps a list of what ran."""
    files = [*(ROOT / "app_pages").glob("*.py"), *(ROOT / "ui").glob("*_sections.py")]
    found = {p.name: code_list_problems(p.read_text(encoding="utf-8")) for p in files}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_hand_kept_check_sees_what_it_looks_for():
    planted = "ran = []\nran += [f]\nanatomy.show_code(*ran)\ndef code_that_ran():\n    return []\n"
    assert len(code_list_problems(planted)) == 5
    assert code_list_problems("with lesson.step('x', shows=(f,)):\n    pass\n") == []


def _called(fn: ast.AST) -> set[str]:
    """The bare names ``fn`` calls (``f(..)`` and ``module.f(..)`` alike)."""
    return {n.func.id if isinstance(n.func, ast.Name) else n.func.attr for n in ast.walk(fn)
            if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))}


def chart_builders() -> set[str]:
    """The chart kinds of ui/charts.py and ui/*_charts.py, and every function there that calls one (a spec is read
    in the style of the run that builds it: ``ui.charts.chart_style``)."""
    funcs = {}
    for path in [ROOT / "ui" / "charts.py", *(ROOT / "ui").glob("*_charts.py")]:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef):
                funcs[node.name] = node
    found = {n for n, f in funcs.items() if any("chart_kind" in ast.unparse(d) for d in f.decorator_list)}
    while True:
        more = {n for n, f in funcs.items() if n not in found and _called(f) & found}
        if not more:
            return found
        found |= more


def _chart_calls(fn: ast.AST, names: set[str], modules: set[str]) -> set[str]:
    """What ``fn`` calls of the chart modules: ``f(..)`` with ``f`` imported from one, ``m.f(..)`` with ``m`` one."""
    out = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names:
            out.add(n.func.id)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                and n.func.value.id in modules:
            out.add(n.func.attr)
    return out


def style_blind_caches(source: str, builders: set[str]) -> list[str]:
    """Functions cached with ``cache_data`` / ``shared_arrays`` (keyed by their arguments only) that build a chart."""
    tree, names, modules = ast.parse(source), set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module == "ui.charts" or \
                isinstance(n, ast.ImportFrom) and (n.module or "").startswith("ui.") and n.module.endswith("_charts"):
            names |= {a.asname or a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.module in ("ui", None):
            modules |= {a.asname or a.name for a in n.names if a.name == "charts" or a.name.endswith("_charts")}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and _chart_calls(node, names, modules) & builders and any(
                ast.unparse(d).startswith(("cache_data", "shared_arrays")) for d in node.decorator_list):
            out.append(f"line {node.lineno}: {node.name} builds a chart under a cache that does not key the style")
    return out


def test_a_cached_chart_is_keyed_by_its_style():
    """A cached function that returns chart specs is ``@chart_cache``: under ``cache_data`` the spec a student's run
    drew first (normal text) reached the presenter's projector on the same server (text below 18 px)."""
    builders = chart_builders()
    assert {"heatmap", "bars", "attention_heatmap"} <= builders
    files = [*(ROOT / "app_pages").glob("*.py"), *(ROOT / "ui").glob("*.py")]
    found = {p.name: style_blind_caches(p.read_text(encoding="utf-8"), builders) for p in files}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_style_check_sees_what_it_looks_for():
    planted = ("from ui.charts import heatmap\nfrom ui import scaling_charts as sc\n"
               "@cache_data(max_entries=4)\ndef a(x):\n    return heatmap(x)\n"
               "@shared_arrays(max_entries=4)\ndef d(x):\n    return sc.heatmap(x)\n"
               "@chart_cache(max_entries=4)\ndef b(x):\n    return heatmap(x)\n"
               "@cache_data(max_entries=4)\ndef c(x):\n    return x + 1\n")
    assert style_blind_caches(planted, {"heatmap"}) == [
        "line 4: a builds a chart under a cache that does not key the style",
        "line 7: d builds a chart under a cache that does not key the style"]
