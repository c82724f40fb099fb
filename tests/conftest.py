import os
import pathlib
import sys

import pytest
from hypothesis import settings

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# Property tests run the same examples on every run by default, so a landing never depends on which random
# inputs were drawn; HYPOTHESIS_PROFILE=explore searches new ones (and found the oracle precision bug of
# test_softmax_jacobian_norm_matches_oracles).
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    """One torch thread for the whole run, as app.py sets for the server: the models are tiny, so thread
    hand-off costs more than it saves on a shared 2-core machine, and results do not depend on the count."""
    import torch
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(autouse=True)
def _seed_torch():
    import torch
    torch.manual_seed(0)
    yield


# Tiers: `-m "not browser and not serving and not slow"` leaves out what starts a real server with Chromium
# (browser), a school of replicas (serving), a retraining or the all-pairs router walk (slow: marked on the test);
# the README names the command. A module here is marked as a whole; a single test
# elsewhere carries its own @pytest.mark.browser.
BROWSER_MODULES = {"test_a11y", "test_browser", "test_fragments_follow", "test_handout", "test_layout",
                   "test_presenter_browser", "test_router_browser", "test_scaling_browser"}
SERVING_MODULES = {"test_serving", "test_poll_serving", "test_fresh_server"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.stem in BROWSER_MODULES:
            item.add_marker(pytest.mark.browser)
        if item.path.stem in SERVING_MODULES:
            item.add_marker(pytest.mark.serving)
    _group_the_sweep(items)


def _group_the_sweep(items) -> None:
    """The tests that assert on a page's shared walk (tests/sweep.py), one page and language after another where
    the first of them was: xdist hands each worker a contiguous run of tests, so the worker that walks a page
    runs every test of that walk."""
    from tests.sweep import SWEEP_MODULES

    def page_of(item):
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.path.stem in SWEEP_MODULES and "key" in params:
            return params["key"], params.get("lang", SWEEP_MODULES[item.path.stem])
        return None

    swept = [item for item in items if page_of(item) is not None]
    if not swept:
        return
    first = items.index(swept[0])
    rest = [item for item in items if page_of(item) is None]
    swept.sort(key=page_of)                      # stable: within a page and language, the modules' order
    items[:] = rest[:first] + swept + rest[first:]


# One `streamlit run app.py` of this checkout for the whole run, shared by the xdist workers, for every browser
# test that needs no fresh server: the first worker to need it starts it, and the run's controller stops it at the end
# (SHARED_ENV names the directory where the workers find it). A server per module, then per worker, drew every page
# cold again for each (~2 s to start, ~3 s of server CPU more on the first visit of a page). Tests that must meet a
# fresh server (a deep link as its first request, a planted app) start their own with scripts/server.start_server.
# Chromium stays per module (~1 s to launch): Playwright's sync API runs an asyncio loop in the worker's main thread
# while it is open, and a later test of that worker that calls asyncio.run (the serving and admission tests) fails
# beside a running loop.
SHARED_ENV = "ATTENTION_TESTS_SHARED"


def pytest_configure(config):
    if not hasattr(config, "workerinput") and SHARED_ENV not in os.environ:   # the controller, before its workers
        import tempfile
        os.environ[SHARED_ENV] = tempfile.mkdtemp(prefix="attention-tests-")
        config._attention_shared = os.environ[SHARED_ENV]


def pytest_unconfigure(config):
    shared = getattr(config, "_attention_shared", None)
    if shared is None:
        return
    import json
    import shutil

    from scripts.server import stop_pid
    info = pathlib.Path(shared, "server.json")
    if info.exists():
        stop_pid(json.loads(info.read_text())["pid"])
    shutil.rmtree(shared, ignore_errors=True)
    os.environ.pop(SHARED_ENV, None)


def _need_chromium():
    import shutil
    if shutil.which("chromium") is None:
        if os.environ.get("CI"):
            raise RuntimeError("CI must install Debian's chromium for the browser tests (.ci/run does)")
        pytest.skip("no chromium on this machine: `apt-get install -y chromium` to run the browser tests")


@pytest.fixture(scope="session")
def server(request):
    """The base URL of the run's shared server (see above); a run without workers has its own."""
    import fcntl
    import json

    from scripts.server import start_server, stop_server
    _need_chromium()
    shared = os.environ.get(SHARED_ENV)
    if not hasattr(request.config, "workerinput") or not shared:
        proc = start_server(ROOT)
        yield proc.base
        stop_server(proc, 30)
        return
    info = pathlib.Path(shared, "server.json")
    with open(pathlib.Path(shared, "server.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)         # one worker starts it; the others wait, then read where it is
        if not info.exists():
            proc = start_server(ROOT)
            info.write_text(json.dumps({"base": proc.base, "pid": proc.pid}))
        base = json.loads(info.read_text())["base"]
    yield base


@pytest.fixture(scope="module")
def browser():
    """The module's Chromium (scripts/layout_check.launch_browser); each test opens its own page or context."""
    _need_chromium()
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    from scripts.layout_check import launch_browser
    with sync_playwright() as p:
        b = launch_browser(p)
        yield b
        b.close()


@pytest.fixture(scope="module")
def _module_tab(browser):
    held: dict = {}
    yield held
    if held.get("context") is not None:
        held["context"].close()


@pytest.fixture
def page(browser, _module_tab):
    """A page at 1280x720 that counts the app's script runs (scripts/layout_check.watch_runs), one for the module's
    tests: each test navigates it (a goto starts a new session) and the next one finds it blank again. A new context
    per test started a renderer and compiled the app's JavaScript again: a third of a presenter walk's CPU
    (docs/performance.md). A test that closed or broke it gets a new one."""
    from scripts.layout_check import watch_runs
    pg = _module_tab.get("page")
    if pg is None or pg.is_closed():
        if _module_tab.get("context") is not None:
            _module_tab["context"].close()
        context = browser.new_context(viewport={"width": 1280, "height": 720}, device_scale_factor=1)
        watch_runs(context)
        pg = context.new_page()
        _module_tab.update(context=context, page=pg)
    pg.set_viewport_size({"width": 1280, "height": 720})
    yield pg
    try:
        pg.goto("about:blank")                # ends the test's session before the next test's visit
    except Exception:  # noqa: BLE001 - a page that cannot navigate is replaced for the next test
        pg.close()
