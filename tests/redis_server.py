"""A real redis-server (Debian's package) for the poll tests: started on a free loopback port in a temporary
folder, no persistence, stopped at the end. CI installs it (.ci/run); elsewhere the tests that need it skip."""
from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import socket
import subprocess
import time

import pytest

from scripts.server import stop_server

REDIS_SERVER = shutil.which("redis-server") or next(
    (p for p in ("/usr/bin/redis-server", "/usr/sbin/redis-server") if os.access(p, os.X_OK)), None)


def need_redis() -> str:
    if REDIS_SERVER is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's redis-server for the poll tests (.ci/run does)")
        pytest.skip("no redis-server on this machine: `apt-get install -y redis-server` to run the Redis tests")
    return REDIS_SERVER


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def redis_server(folder: pathlib.Path):
    """Yield the URL of a fresh redis-server; stop it afterwards (also on failure)."""
    exe = need_redis()
    port = _free_port()
    folder.mkdir(parents=True, exist_ok=True)
    log = open(folder / "redis.log", "wb")
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
                             "--save", "", "--appendonly", "no", "--protected-mode", "yes"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start: " + (folder / "redis.log").read_text()[-1000:])
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        stop_server(proc, 10)
        log.close()
