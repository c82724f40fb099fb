"""Entry point for Streamlit Community Cloud.

Community Cloud installs the requirements file that sits next to the entry point, so this
folder carries its own requirements.txt that takes PyTorch's CPU-only wheel (the default
Linux wheel on PyPI is a multi-GB CUDA build). Locally, run the app with `streamlit run app.py`.
"""
import pathlib
import runpy
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
runpy.run_path(str(ROOT / "app.py"), run_name="__main__")
