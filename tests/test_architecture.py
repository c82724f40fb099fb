"""The layout shows the architecture: keep the layers honest."""
import ast
import pathlib
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
    forbidden = {"streamlit", "altair", "pandas", "ui", "matplotlib", "seaborn", "requests", "transformers"}
    for path in (ROOT / "attention_core").rglob("*.py"):
        assert not imported_modules(path) & forbidden, f"{path.name} imports {imported_modules(path) & forbidden}"


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
    for folder in ("pages", "ui", "attention_core"):
        for path in (ROOT / folder).rglob("*.py"):
            assert not imported_modules(path) & network, f"{path.relative_to(ROOT)} imports a network module"
    app = (ROOT / "app.py")
    assert not imported_modules(app) & network
