"""Entry point for Streamlit Community Cloud.

Community Cloud installs the requirements file that sits next to the entry point, so this
folder carries its own requirements.txt that takes PyTorch's CPU-only wheel (the default
Linux wheel on PyPI is a multi-GB CUDA build). Locally, run the app with `streamlit run app.py`.
"""
import pathlib
import runpy
import sys

import streamlit as st

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Deployed, an unexpected error shows Streamlit's short generic message ("This app has encountered an
# error ...") instead of the exception, its type, server paths and traceback; the full traceback still goes
# to the server log (Community Cloud: "Manage app"). Set here in code rather than in .streamlit/config.toml:
# it then applies whatever value the platform passes on the command line or in its environment (a
# script's st.set_option comes last), and only this entry point has it, so `streamlit run app.py` and the
# tests (AppTest runs app.py) keep Streamlit's default, "full" tracebacks.
ERROR_DETAILS = "none"
st.set_option("client.showErrorDetails", ERROR_DETAILS)
runpy.run_path(str(ROOT / "app.py"), run_name="__main__")
