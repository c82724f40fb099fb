"""Start a Streamlit server of this app and wait until it answers its health check: the one way the
benchmarks (scripts/bench_*.py), the browser test (tests/test_browser.py) and deploy/loadcheck.py do it."""
from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 60.0, log=None) -> None:
    """Return once 127.0.0.1:``port`` answers /_stcore/health; raise if ``proc`` exits or time runs out
    (with the tail of ``log``, a file the server writes to, when given)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1)
            return
        except OSError:
            if proc.poll() is not None:
                tail = ""
                if log is not None:
                    log.seek(0)
                    tail = log.read().decode(errors="replace")[-2000:]
                raise RuntimeError("the server exited: " + tail)
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"the server did not answer /_stcore/health within {timeout:.0f} s")


def stop_server(proc: subprocess.Popen, grace: float = 15.0) -> None:
    """Ask the process to stop; kill it if it has not exited within ``grace`` seconds."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def stop_pid(pid: int, grace: float = 30.0) -> None:
    """Stop a server that another process started, known by its pid: SIGTERM, SIGKILL after ``grace`` seconds."""
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(int(grace * 10)):
            time.sleep(0.1)
            os.kill(pid, 0)                       # ProcessLookupError once it has exited
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def start_server(root: pathlib.Path = ROOT, port: int | None = None) -> subprocess.Popen:
    """``streamlit run app.py`` of ``root`` on 127.0.0.1:``port`` (``proc.port``), once it is healthy. Its log goes
    to a temporary file: a pipe nobody reads would stall a chatty server."""
    port = port or free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true",
                             "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"],
                            cwd=root, stdout=subprocess.DEVNULL, stderr=log)
    wait_healthy(port, proc, 60.0, log)
    proc.port, proc.base = port, f"http://127.0.0.1:{port}"
    return proc
