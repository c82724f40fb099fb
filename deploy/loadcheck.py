"""Drive the app the way browsers do, with Streamlit's own websocket protocol, and measure one replica.

The browser loads the page over HTTP (HAProxy sets its SERVERID cookie there), opens a websocket to
/_stcore/stream, asks for script runs with a BackMsg and reads ForwardMsgs until the run finishes. `Client`
does the same, keeping its cookie; tests/test_serving.py drives 60 of them through the balancer.

    python deploy/loadcheck.py                       one replica on a free local port: its memory as sessions
                                                     accumulate, and page runs per second with 1, 4, 8 learners
                                                     (the figures of the README's "Serving a school")
    python deploy/loadcheck.py http://school:8080    check a running deployment: 30 sessions over every page,
                                                     errors and sessions per replica (cookie)
"""
import argparse
import asyncio
import os
import pathlib
import random
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.asyncio.client import connect

ROOT = pathlib.Path(__file__).resolve().parent.parent
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # loopback only, whatever the env says


def http_get(url: str, cookie: str | None = None) -> tuple[int, str | None, bytes]:
    """(status, the SERVERID cookie the response sets or None, body)."""
    req = urllib.request.Request(url, headers={"Cookie": f"SERVERID={cookie}"} if cookie else {})
    try:
        with NO_PROXY.open(req, timeout=60) as r:
            status, headers, body = r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        status, headers, body = e.code, e.headers, b""
    set_cookie = re.search(r"SERVERID=([^;]+)", " ".join(headers.get_all("Set-Cookie") or []))
    return status, set_cookie.group(1) if set_cookie else None, body


class Client:
    """One browser tab: the cookie HAProxy set, one websocket to /_stcore/stream, reruns over it."""

    def __init__(self, base: str, lang: str):
        self.base, self.lang = base, lang
        self.cookie: str | None = None
        self.ws = None
        self.sid: str | None = None
        self.pages: dict[str, str] = {}       # url path -> page_script_hash (from the navigation message)
        self.errors: list[str] = []

    async def get(self, path: str) -> tuple[int, bytes]:
        status, set_cookie, body = await asyncio.to_thread(http_get, self.base + path, self.cookie)
        if set_cookie:
            self.cookie = set_cookie
        if status != 200:
            self.errors.append(f"GET {path}: HTTP {status}")
        return status, body

    async def connect(self, reconnect: bool = False):
        # a reconnecting browser names its session in the subprotocol list: (protocol, xsrf token, session id)
        protocols = ["streamlit", "-", self.sid] if reconnect and self.sid else ["streamlit"]
        self.ws = await connect(
            self.base.replace("http://", "ws://") + "/_stcore/stream", subprotocols=protocols, proxy=None,
            origin=self.base, additional_headers={"Cookie": f"SERVERID={self.cookie}"} if self.cookie else None,
            max_size=None, open_timeout=30, compression=None)
        set_cookie = re.search(r"SERVERID=([^;]+)", " ".join(self.ws.response.headers.get_all("Set-Cookie")))
        if set_cookie:
            self.cookie = set_cookie.group(1)

    async def recv(self, timeout: float = 120):
        msg = ForwardMsg()
        msg.ParseFromString(await asyncio.wait_for(self.ws.recv(), timeout))
        return msg

    async def run_page(self, path: str) -> dict:
        """Ask for a run of the page at url `path` (as the browser does on load or a click in the navigation) and
        read until it finishes. Returns what a test needs: elements drawn, CSV downloads offered, script time."""
        msg = BackMsg()
        msg.rerun_script.query_string = f"lang={self.lang}"
        msg.rerun_script.page_name = path
        msg.rerun_script.page_script_hash = self.pages.get(path, "")
        msg.rerun_script.context_info.locale = "zh-CN" if self.lang == "zh" else "en-US"
        t0 = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        out = {"elements": 0, "downloads": [], "seconds": 0.0}
        for _ in range(20000):
            fwd = await self.recv()
            kind = fwd.WhichOneof("type")
            if kind == "new_session":
                self.sid = fwd.new_session.initialize.session_id
            elif kind == "navigation":
                self.pages = {p.url_pathname: p.page_script_hash for p in fwd.navigation.app_pages}
            elif kind == "page_not_found":
                self.errors.append(f"page {path!r}: page not found")
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                element = fwd.delta.new_element
                out["elements"] += 1
                if element.WhichOneof("type") == "exception":
                    self.errors.append(f"page {path!r} ({self.lang}): exception {element.exception.type} "
                                       f"{element.exception.message[:200]}")
                elif element.WhichOneof("type") == "download_button" and element.download_button.deferred_file_id:
                    out["downloads"].append(element.download_button.deferred_file_id)
            elif kind == "script_finished":
                if fwd.script_finished == 1:   # FINISHED_WITH_COMPILE_ERROR
                    self.errors.append(f"page {path!r}: compile error")
                if fwd.script_finished != 2:   # not FINISHED_EARLY_FOR_RERUN: this run is the page
                    break
        out["seconds"] = time.perf_counter() - t0
        if out["elements"] < 5:
            self.errors.append(f"page {path!r} ({self.lang}): only {out['elements']} elements drawn")
        return out

    async def download_url(self, file_id: str) -> str:
        """Click a CSV download: the replica makes the file and answers with its /media/ URL."""
        msg = BackMsg()
        msg.backend_operation_request.request_id = file_id
        msg.backend_operation_request.session_id = self.sid
        msg.backend_operation_request.deferred_file.file_id = file_id
        await self.ws.send(msg.SerializeToString())
        for _ in range(1000):
            fwd = await self.recv()
            if fwd.WhichOneof("type") == "backend_operation_response":
                response = fwd.backend_operation_response
                if response.error_msg or not response.deferred_file.url:
                    self.errors.append(f"CSV download: {response.error_msg or 'no url'}")
                return response.deferred_file.url
        self.errors.append("CSV download: no answer")
        return ""

    async def close(self):
        if self.ws is not None:
            await self.ws.close()
            self.ws = None


# --------------------------------------------------------------------------------- the school, started

def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def page_paths() -> list[str]:
    """The url path of every page of the app ("" is the home page)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from ui.registry import available_pages
    return ["" if p.key == "home" else p.key for p in available_pages()]


def start_replica(port: int) -> subprocess.Popen:
    """deploy/run-replica.sh on 127.0.0.1:port, once it answers its health check."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from scripts.server import wait_healthy

    proc = subprocess.Popen(["sh", str(ROOT / "deploy" / "run-replica.sh"), str(port), "127.0.0.1"],
                            env={**os.environ, "PYTHON": sys.executable}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    wait_healthy(port, proc, timeout=180)
    return proc


async def measure_replica(base: str, pid: int, pages: list[str]):
    import psutil
    proc = psutil.Process(pid)

    def rss() -> float:
        return proc.memory_info().rss / 2**20

    print(f"idle replica: RSS {rss():.0f} MB")
    held: list[Client] = []
    for target in (1, 5, 10, 20, 40, 60):
        while len(held) < target:
            i = len(held)
            client = Client(base, "zh" if i % 2 else "en")
            await client.connect()
            await client.run_page(pages[i % len(pages)])
            await client.run_page(pages[(i + len(pages) // 2) % len(pages)])
            held.append(client)
        await asyncio.sleep(1)
        print(f"{target:3d} sessions open (2 pages drawn each): RSS {rss():.0f} MB")
    errors = [e for c in held for e in c.errors]
    for client in held:
        await client.close()
    for learners in (1, 4, 8):
        times: list[float] = []
        stop = time.perf_counter() + 40

        async def learner(k):
            client = Client(base, "zh" if k % 2 else "en")
            await client.connect()
            rnd = random.Random(k)
            while time.perf_counter() < stop:
                times.append((await client.run_page(rnd.choice(pages)))["seconds"])
            errors.extend(client.errors)
            await client.close()

        t0 = time.perf_counter()
        await asyncio.gather(*(learner(k) for k in range(learners)))
        wall = time.perf_counter() - t0
        times.sort()
        print(f"{learners} learners switching pages without pause: {len(times) / wall:.2f} page runs/s, drawn in "
              f"{times[len(times) // 2]:.2f} s median, {times[int(len(times) * 0.9)]:.2f} s p90; RSS {rss():.0f} MB "
              f"(load average {os.getloadavg()[0]:.1f})")
    print(f"errors: {len(errors)}", *errors[:5], sep="\n")


async def check_deployment(base: str, pages: list[str], sessions: int):
    per_cookie: dict[str, int] = {}
    errors: list[str] = []

    async def session(i):
        client = Client(base, "zh" if i % 2 else "en")
        try:
            await client.get(f"/{pages[i % len(pages)]}?lang={client.lang}")
            await client.connect()
            await client.run_page(pages[i % len(pages)])
            sid = client.sid
            await client.close()
            await client.connect(reconnect=True)
            await client.run_page(pages[(i + 1) % len(pages)])
            if client.sid != sid:
                client.errors.append("the reconnection reached another replica")
        except Exception as e:
            client.errors.append(f"{type(e).__name__}: {e}")
        finally:
            await client.close()
        per_cookie[client.cookie or "(no cookie)"] = per_cookie.get(client.cookie or "(no cookie)", 0) + 1
        errors.extend(f"session {i}: {e}" for e in client.errors)

    gate = asyncio.Semaphore(8)

    async def gated(i):
        async with gate:
            await session(i)

    await asyncio.gather(*(gated(i) for i in range(sessions)))
    print(f"{sessions} sessions; per replica (cookie): {per_cookie}; errors: {len(errors)}", *errors[:10], sep="\n")
    return not errors


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url", nargs="?", help="a running deployment; without it, measure one local replica")
    parser.add_argument("--sessions", type=int, default=30)
    args = parser.parse_args()
    pages = page_paths()
    if args.url:
        sys.exit(0 if asyncio.run(check_deployment(args.url.rstrip("/"), pages, args.sessions)) else 1)
    port = free_ports(1)[0]
    proc = start_replica(port)
    try:
        asyncio.run(measure_replica(f"http://127.0.0.1:{port}", proc.pid, pages))
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
