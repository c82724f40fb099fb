"""A class opening the same link at once: N sessions ask one server for the same page at the same moment.

Each session is a websocket client speaking Streamlit's protocol (``deploy/loadcheck.Client``): it connects, then all
of them send their page request together, and each one's time is measured from that common start until its run has
finished (every element sent). The server is warmed first by one session opening each page once (the teacher who
tried the link before class): what is measured is a class's first visit, not the server's first import.

    python scripts/bench_class.py                                 30 sessions on the pages the lesson plans open first
    python scripts/bench_class.py --sessions 60 --pages qkv       one page, 60 sessions
    python scripts/bench_class.py --bare                          the same against a bare Streamlit page (four
                                                                  Altair heatmaps): the floor of one server
    python scripts/bench_class.py --slots 0,1,2                   one server per value of ATTENTION_APP_RUN_SLOTS
                                                                  (serving.admission; 0: every run at once), same run
    python scripts/bench_class.py --url http://host:8501          a running server (not warmed, not started)

Prints, per page: p50 / p95 / max seconds until a session's page has arrived, and the server's CPU seconds per
session (psutil: user + system time of the server process over the burst, divided by N). A benchmark, not a test:
compare figures within one run on a quiet machine.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import statistics
import sys
import tempfile
import textwrap
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streamlit.proto.BackMsg_pb2 import BackMsg  # noqa: E402

from deploy.loadcheck import Client  # noqa: E402
from scripts.server import start_server  # noqa: E402

# the first page of each lesson plan on the Teach page (ui.course.LESSON_PLANS) and the page the course starts from
LESSON_FIRST = ("bottleneck", "qkv", "multihead", "kv_cache")

BARE_APP = textwrap.dedent('''
    import altair as alt
    import numpy as np
    import pandas as pd
    import streamlit as st

    st.title("Four heatmaps")
    rng = np.random.default_rng(0)
    for i in range(4):
        w = rng.random((12, 12))
        frame = pd.DataFrame([(q, k, w[q, k]) for q in range(12) for k in range(12)], columns=["q", "k", "w"])
        st.altair_chart(alt.Chart(frame).mark_rect().encode(x="k:O", y="q:O", color="w:Q"), width="stretch")
''')


async def open_page(client: Client, path: str, query: str, start: asyncio.Event) -> float:
    """Wait for the common start, ask for the page and read until its run has finished; seconds from the start."""
    msg = BackMsg()
    msg.rerun_script.query_string = query
    msg.rerun_script.page_name = path
    msg.rerun_script.context_info.locale = "zh-CN" if client.lang == "zh" else "en-US"
    await start.wait()
    t0 = time.perf_counter()
    await client.ws.send(msg.SerializeToString())
    elements = 0
    while True:
        fwd = await client.recv(timeout=300)
        kind = fwd.WhichOneof("type")
        if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
            elements += 1
            if fwd.delta.new_element.WhichOneof("type") == "exception":
                client.errors.append(f"{path}: exception {fwd.delta.new_element.exception.message[:120]}")
        elif kind == "script_finished" and fwd.script_finished != 2:      # 2: finished early for a rerun
            break
    if elements < 3:
        client.errors.append(f"{path}: only {elements} elements")
    return time.perf_counter() - t0


async def burst(base: str, path: str, query: str, n: int, lang: str, server_pid: int | None) -> dict:
    clients = [Client(base, lang) for _ in range(n)]
    await asyncio.gather(*(c.connect() for c in clients))
    await asyncio.sleep(0.5)                       # let the server settle after n handshakes
    cpu0 = _cpu(server_pid)
    start = asyncio.Event()
    tasks = [asyncio.create_task(open_page(c, path, query, start)) for c in clients]
    await asyncio.sleep(0)
    start.set()
    times = sorted(await asyncio.gather(*tasks))
    cpu = _cpu(server_pid) - cpu0 if server_pid else float("nan")
    errors = [e for c in clients for e in c.errors]
    await asyncio.gather(*(c.close() for c in clients))
    return {"p50": statistics.median(times), "p95": times[min(n - 1, int(round(0.95 * (n - 1))))],
            "max": times[-1], "min": times[0], "cpu_per_session": cpu / n, "errors": errors}


def _cpu(pid: int | None) -> float:
    if not pid:
        return 0.0
    import psutil
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


async def main_async(args) -> int:
    failed = 0
    for slots in args.slots.split(",") if args.slots else [None]:
        if slots is not None:
            os.environ["ATTENTION_APP_RUN_SLOTS"] = slots
            print(f"ATTENTION_APP_RUN_SLOTS={slots}", flush=True)
        failed += await one_server(args)
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 1 if failed else 0


async def one_server(args) -> int:
    proc = None
    if args.url:
        base, pid = args.url.rstrip("/"), None
    elif args.bare:
        folder = pathlib.Path(tempfile.mkdtemp(prefix="bare_app_"))
        (folder / "app.py").write_text(BARE_APP)
        proc = start_server(folder)
        base, pid = proc.base, proc.pid
    else:
        proc = start_server(ROOT)
        base, pid = proc.base, proc.pid
    pages = [""] if args.bare else args.pages.split(",")
    failed = 0
    try:
        for page in pages:
            query = f"lang={args.lang}"
            if not args.url:                   # warm: the teacher opened the link once before class
                await burst(base, page, query, 1, args.lang, None)
            r = await burst(base, page, query, args.sessions, args.lang, pid)
            print(f"/{page or '(bare app)'} {args.sessions} sessions at once: p50 {r['p50']:.2f} s, p95 "
                  f"{r['p95']:.2f} s, max {r['max']:.2f} s (first {r['min']:.2f} s); server CPU "
                  f"{1000 * r['cpu_per_session']:.0f} ms per session; errors {len(r['errors'])}", flush=True)
            for e in r["errors"][:5]:
                print("   ", e)
            failed += bool(r["errors"])
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--pages", default=",".join(LESSON_FIRST), help="comma-separated url paths")
    parser.add_argument("--lang", default="en", choices=["en", "zh"])
    parser.add_argument("--bare", action="store_true", help="a bare Streamlit page with four Altair charts")
    parser.add_argument("--url", help="a running server")
    parser.add_argument("--slots", help="comma-separated values of ATTENTION_APP_RUN_SLOTS, one server each")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
