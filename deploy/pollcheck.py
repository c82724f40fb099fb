"""A class answering "Ask the class" the way phones and the projector do, over Streamlit's websocket.

`PollClient` is a `loadcheck.Client` (one browser tab) that also clicks buttons and reads what a run drew; a
teacher opens a room from a page's exercise, then redraws the projector as the browser does (the fragment's
auto-rerun); students join with the room's link and vote. tests/test_poll_serving.py drives a class through 3
replicas and Redis; run as a script it measures one server's memory with many rooms open:

    python deploy/pollcheck.py                     one server (in-process rooms): 10 rooms x 60 voters, peak RSS
    python deploy/pollcheck.py --rooms 5 --voters 30
Then one class waits for the reveal (its phones redraw every 2 s, its projector every second): the server's CPU.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import pathlib
import re
import sys
import time

from streamlit.proto.BackMsg_pb2 import BackMsg

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from deploy.loadcheck import Client, free_ports  # noqa: E402

VOTES = re.compile(r"(?:votes cast: |已投 )(\d+)")


class PollClient(Client):
    """A browser tab that remembers what the last run drew: buttons (by key), texts, the fragment to redraw."""

    def __init__(self, base: str, lang: str):
        super().__init__(base, lang)
        self.query = f"lang={lang}"
        self.page = ""
        self.buttons: dict[str, str] = {}      # widget key -> widget id
        self.inputs: dict[str, str] = {}       # text input key -> widget id
        self.texts: list[str] = []
        self.fragment: str | None = None       # the fragment the server asked this tab to rerun (run_every)

    async def open(self, page: str, query: str = "") -> None:
        """Load a page as a browser does: GET (the balancer's cookie), the websocket, the first run."""
        self.page, self.query = page, "&".join(q for q in (query, f"lang={self.lang}") if q)
        await self.get(f"/{page}?{self.query}")
        await self.connect()
        await self.rerun()

    async def rerun(self, *, click: str | None = None, fragment: str | None = None, timeout: float = 60) -> list[str]:
        """One script run (of ``fragment`` only when given), with the button of key ``click`` pressed; returns
        the texts drawn (markdown, alerts, captions, code, labels)."""
        msg = BackMsg()
        rerun = msg.rerun_script
        rerun.query_string = self.query
        rerun.page_name = self.page
        rerun.page_script_hash = self.pages.get(self.page, "")
        rerun.context_info.locale = "zh-CN" if self.lang == "zh" else "en-US"
        if fragment:
            rerun.fragment_id, rerun.is_auto_rerun = fragment, True
        room = re.search(r"room=([^&]*)", self.query)
        for key, wid in self.inputs.items():
            if key == "room" and room:
                state = rerun.widget_states.widgets.add()
                state.id, state.string_value = wid, room.group(1)
        if click:
            state = rerun.widget_states.widgets.add()
            state.id, state.trigger_value = self.buttons[click], True
        await self.ws.send(msg.SerializeToString())
        texts: list[str] = []
        if not fragment:
            self.buttons = {}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            fwd = await self.recv(timeout)
            kind = fwd.WhichOneof("type")
            if kind == "new_session":
                self.sid = fwd.new_session.initialize.session_id
            elif kind == "navigation":
                self.pages = {p.url_pathname: p.page_script_hash for p in fwd.navigation.app_pages}
                hash_ = fwd.navigation.page_script_hash
                self.page = next((p.url_pathname for p in fwd.navigation.app_pages if p.page_script_hash == hash_),
                                 self.page)
            elif kind == "page_info_changed":
                self.query = fwd.page_info_changed.query_string
            elif kind == "auto_rerun":
                self.fragment = fwd.auto_rerun.fragment_id
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                el = fwd.delta.new_element
                what = el.WhichOneof("type")
                if what == "exception":
                    self.errors.append(f"{self.page}: exception {el.exception.type} {el.exception.message[:200]}")
                elif what == "button":
                    self.buttons[el.button.id.rsplit("-", 1)[-1]] = el.button.id
                    texts.append(el.button.label)
                elif what == "text_input":
                    self.inputs[el.text_input.id.rsplit("-", 1)[-1]] = el.text_input.id
                elif what in ("markdown", "alert", "code"):
                    texts.append(getattr(el, what).body if what != "code" else el.code.code_text)
            elif kind == "script_finished" and fwd.script_finished != 2:   # 2: ended early for a rerun
                break
        else:
            self.errors.append(f"{self.page}: the run did not finish in {timeout} s")
        self.texts = texts
        return texts

    def room(self) -> str | None:
        m = re.search(r"room=([A-Z0-9]{8})", self.query)
        return m.group(1) if m else None

    def votes(self) -> int | None:
        """The total the projector shows now."""
        for text in self.texts:
            m = VOTES.search(text)
            if m:
                return int(m.group(1))
        return None


async def teacher_opens(base: str, page: str = "gqa", exercise: str = "gqa_ex", lang: str = "en",
                        marker: str = "teacher=1") -> PollClient:
    """A teacher's tab: the page, then "Ask the class" under its exercise; the tab is then on the projector view."""
    teacher = PollClient(base, lang)
    await teacher.open(page, marker)
    await teacher.rerun(click=f"{exercise}_ask")
    if teacher.room() is None or "poll_reveal" not in teacher.buttons:
        teacher.errors.append(f"no room opened: query {teacher.query!r}, buttons {sorted(teacher.buttons)}")
    return teacher


async def student_votes(base: str, code: str, lang: str, option: int) -> tuple[PollClient, float | None]:
    """A phone: the join link, one vote. Returns the client and when the vote was acknowledged (perf_counter),
    None when it was not."""
    phone = PollClient(base, lang)
    await phone.open("poll", f"room={code}")
    texts = await phone.rerun(click=f"poll_vote_{option}")
    ok = ("Vote received." in texts) or ("已收到你的投票。" in texts)
    return phone, time.perf_counter() if ok else None


# ------------------------------------------------------------------------------------- memory, one server

async def measure(base: str, pid: int, rooms: int, voters: int, refresh_seconds: float = 20) -> None:
    import psutil
    proc = psutil.Process(pid)
    peak = [proc.memory_info().rss]
    stop = asyncio.Event()

    async def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            await asyncio.sleep(0.2)

    sampler = asyncio.create_task(sample())
    print(f"idle server: RSS {proc.memory_info().rss / 2**20:.0f} MB")
    pages = [("gqa", "gqa_ex"), ("kv_cache", "kv_cache_ex"), ("induction_heads", "induction_heads_ex"),
             ("template", "template_ex")]
    teachers = []
    for r in range(rooms):
        page, ex = pages[r % 2]
        teachers.append(await teacher_opens(base, page, ex, "zh" if r % 2 else "en"))
    print(f"{rooms} rooms open: RSS {proc.memory_info().rss / 2**20:.0f} MB")
    phones: list[PollClient] = []
    gate = asyncio.Semaphore(16)
    t0 = time.perf_counter()

    async def one(r: int, i: int):
        async with gate:
            phone, acked = await student_votes(base, teachers[r].room(), "zh" if i % 2 else "en", i % 3)
            phones.append(phone)
            return acked is not None

    acked = await asyncio.gather(*(one(r, i) for i in range(voters) for r in range(rooms)))
    wall = time.perf_counter() - t0
    for teacher in teachers:
        await teacher.rerun(fragment=teacher.fragment)
    shown = [t.votes() for t in teachers]
    errors = [e for c in teachers + phones for e in c.errors]
    print(f"{len(phones)} phones connected, {sum(acked)} votes acknowledged in {wall:.1f} s; projectors show "
          f"{shown}; RSS now {proc.memory_info().rss / 2**20:.0f} MB, peak {peak[0] / 2**20:.0f} MB; "
          f"errors {len(errors)} {errors[:3]}")
    # a class waiting for the reveal: its 60 phones redraw every 2 s and the projector every second, as the
    # fragments ask their browsers; the server's CPU and the time of one redraw
    cls = [p for p in phones if p.query and f"room={teachers[0].room()}" in p.query][:voters]
    times: list[float] = []
    until = time.perf_counter() + refresh_seconds
    proc.cpu_percent(None)

    async def redraw(client: PollClient, every: float, offset: float):
        await asyncio.sleep(offset)
        while time.perf_counter() < until:
            t = time.perf_counter()
            await client.rerun(fragment=client.fragment)
            times.append(time.perf_counter() - t)
            await asyncio.sleep(max(0.0, every - (time.perf_counter() - t)))

    await asyncio.gather(redraw(teachers[0], 1.0, 0.0),
                         *(redraw(p, 2.0, 2.0 * i / max(len(cls), 1)) for i, p in enumerate(cls)))
    cpu = proc.cpu_percent(None)
    times.sort()
    if times:
        print(f"{len(cls)} phones and a projector redrawing for {refresh_seconds:.0f} s: {len(times)} redraws, "
              f"{times[len(times) // 2] * 1000:.0f} ms median, {times[int(len(times) * 0.9)] * 1000:.0f} ms p90; "
              f"server CPU {cpu:.0f} % of one core; RSS {proc.memory_info().rss / 2**20:.0f} MB, "
              f"peak {peak[0] / 2**20:.0f} MB")
    stop.set()
    await sampler
    for c in teachers + phones:
        await c.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rooms", type=int, default=10)
    parser.add_argument("--voters", type=int, default=60)
    parser.add_argument("--refresh", type=float, default=20, help="seconds of one class redrawing (0: none)")
    args = parser.parse_args()
    from scripts.server import start_server
    os.environ.pop("REDIS_URL", None)
    proc = start_server(port=free_ports(1)[0])
    try:
        asyncio.run(measure(proc.base, proc.pid, args.rooms, args.voters, args.refresh))
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
