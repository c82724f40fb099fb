"""The deployed entry point (cloud/streamlit_app.py) hides error details; app.py, as run locally and in the
tests, shows them in full (a learner never sees server paths or a traceback). About 6 s."""
import pytest
from streamlit import config
from streamlit.testing.v1 import AppTest

from tests.apptest_util import APP, ROOT
from ui.i18n import catalog

CLOUD = str(ROOT / "cloud" / "streamlit_app.py")
SECRET = "/srv/secret/path/model.pt is corrupt"


@pytest.fixture
def restore_error_details():
    """st.set_option is process-wide: put the option back for the other tests."""
    old = config.get_option("client.showErrorDetails")
    yield
    config.set_option("client.showErrorDetails", old)


def boom(*_args, **_kwargs):
    raise RuntimeError(SECRET)


def test_the_cloud_entry_point_runs_the_app(restore_error_details):
    at = AppTest.from_file(CLOUD, default_timeout=60)
    at.query_params["lang"] = "zh"
    at.run()
    assert list(at.exception) == []
    assert at.title[0].value == catalog("zh")["home.title"]
    assert config.get_option("client.showErrorDetails") == "none"


def test_deployed_an_unexpected_error_shows_a_short_message(restore_error_details, monkeypatch):
    monkeypatch.setattr("ui.registry.available_pages", boom)
    at = AppTest.from_file(CLOUD, default_timeout=60).run()
    (shown,) = at.exception
    assert SECRET not in shown.message and "RuntimeError" not in shown.message
    assert list(shown.stack_trace) == [] and str(ROOT) not in str(shown.proto)
    assert "encountered an error" in shown.message


def test_locally_the_same_error_shows_its_details(monkeypatch):
    monkeypatch.setattr("ui.registry.available_pages", boom)
    at = AppTest.from_file(APP, default_timeout=60).run()
    (shown,) = at.exception
    assert SECRET in shown.message and any("app.py" in line for line in shown.stack_trace)
