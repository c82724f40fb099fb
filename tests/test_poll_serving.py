"""Ask the class across a school: 3 replicas behind HAProxy (deploy/serve.sh) sharing their rooms in a real
redis-server (REDIS_URL), driven over Streamlit's websocket as phones and a projector drive it (deploy/pollcheck.py).

- a teacher opens a room on one replica; 60 students join through the balancer (so their sessions spread over the
  replicas, most not the teacher's), then vote: from the first click to the last acknowledged vote within 10 s;
  the projector, redrawn as its fragment asks (every second), shows the right total within 2 s of the last one;
- a second round, and a replica (not the teacher's) killed in the middle of the vote: no vote already counted is
  lost (the projector's total is Redis's, and at least every acknowledged vote); the students whose phone lost its
  replica reload (a new session on a live replica) and vote, and the total is then every student's vote, give or
  take the few whose vote was counted just before their replica died (a new session votes again: README).
Runtime: 2 to 4 minutes on 2 cores (the replicas' start, 60 joins and the kill's aftermath).
"""
from __future__ import annotations

import asyncio
import os
import re
import signal
import time

import pytest

from deploy.pollcheck import PollClient, student_votes, teacher_opens
from tests.redis_server import redis_server
from tests.test_serving import REPLICAS, School, need_haproxy

STUDENTS = 60


@pytest.fixture(scope="module")
def school_with_redis(tmp_path_factory):
    need_haproxy()
    with redis_server(tmp_path_factory.mktemp("redis")) as url, pytest.MonkeyPatch.context() as mp:
        mp.setenv("REDIS_URL", url)
        school = School(tmp_path_factory.mktemp("school"))
        try:
            school.wait_ready()
            yield school, url
        finally:
            school.stop()


def replica_of(school: School, marker: str) -> int:
    """Which replica answered the first request carrying ``marker`` (HAProxy's log)."""
    for _ in range(50):
        for line in school.log():
            m = re.search(rf" app/(\S+) .*\"GET /\S*{re.escape(marker)}", line)
            if m:
                return school.server_of(m.group(1))
        time.sleep(0.1)
    raise AssertionError(f"no request with {marker} in HAProxy's log")


async def warm(school: School) -> None:
    """Each replica's first run imports the pages' modules (seconds): done before the class starts."""
    for port in school.ports:
        client = PollClient(f"http://127.0.0.1:{port}", "en")
        await client.open("poll")
        await client.close()


async def projector_total(teacher: PollClient, want: int, timeout: float) -> float | None:
    """Redraw the projector's fragment every second, as the browser does, until it shows ``want`` votes;
    return how long that took (None if it never did)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        await teacher.rerun(fragment=teacher.fragment)
        if teacher.votes() == want:
            return time.perf_counter() - t0
        await asyncio.sleep(1.0)
    return None


async def a_class(school: School, redis_url: str) -> dict:
    await warm(school)
    base = school.base
    teacher = await teacher_opens(base, marker="teacher=projector")
    assert not teacher.errors, teacher.errors
    code = teacher.room()
    teacher_replica = replica_of(school, "teacher=projector")
    out = {"teacher_replica": teacher_replica}

    # round 1: 60 phones join with the room's link (both languages), then vote when the teacher says so, their
    # clicks spread over 5 s; each vote is acknowledged on the phone ("Vote received.")
    choice = [i % 3 for i in range(STUDENTS)]
    phones = [PollClient(base, "zh" if i % 2 else "en") for i in range(STUDENTS)]
    t0 = time.perf_counter()
    await asyncio.gather(*(p.open("poll", f"room={code}") for p in phones))
    out["round1_join_seconds"] = time.perf_counter() - t0
    out["round1_cookies"] = {p.cookie for p in phones}

    async def vote1(i: int, delay: float):
        await asyncio.sleep(delay)
        texts = await phones[i].rerun(click=f"poll_vote_{choice[i]}")
        return time.perf_counter() if ("Vote received." in texts or "已收到你的投票。" in texts) else None

    t0 = time.perf_counter()
    acked = [a for a in await asyncio.gather(*(vote1(i, i * 5.0 / STUDENTS) for i in range(STUDENTS)))
             if a is not None]
    out["round1_errors"] = [e for p in phones for e in p.errors]
    out["round1_acked"] = len(acked)
    out["round1_window"] = max(acked) - t0 if acked else None
    out["round1_latency"] = await projector_total(teacher, len(acked), 10)
    for p in phones:
        await p.close()

    # round 2, and a replica killed in the middle of it
    await teacher.rerun(click="poll_next")
    victim = next(k for k in range(REPLICAS) if k != teacher_replica)
    phones = [PollClient(base, "zh" if i % 2 else "en") for i in range(STUDENTS)]
    for p in phones:
        await p.open("poll", f"room={code}")
    on_victim = []
    for i, p in enumerate(phones):
        await p.get(f"/poll?room={code}&probe={i}x")       # which replica holds this phone (its cookie)
    for i in range(STUDENTS):
        if replica_of(school, f"probe={i}x") == victim:
            on_victim.append(i)
    out["on_victim"] = len(on_victim)
    acks: dict[int, float] = {}
    lost: list[int] = []

    async def vote(i: int, delay: float):
        await asyncio.sleep(delay)
        try:
            texts = await phones[i].rerun(click=f"poll_vote_{(i + 1) % 3}", timeout=15)
            if "Vote received." in texts or "已收到你的投票。" in texts:
                acks[i] = time.perf_counter()
            else:
                lost.append(i)
        except Exception:       # the websocket of a phone on the killed replica
            lost.append(i)

    async def kill_midway():
        while len(acks) < STUDENTS // 2:
            await asyncio.sleep(0.05)
        os.kill(school.pids[victim], signal.SIGKILL)
        return len(acks)

    killer = asyncio.create_task(kill_midway())
    await asyncio.gather(*(vote(i, i * 6.0 / STUDENTS) for i in range(STUDENTS)))
    out["acked_before_kill"] = await killer
    import redis
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    counted = sum(int(v) for k, v in r.hgetall(f"poll:{code}:c").items() if k.startswith("2:"))
    await teacher.rerun(fragment=teacher.fragment)
    out["round2"] = {"acked": len(acks), "lost_connection": len(lost), "counted": counted,
                     "projector": teacher.votes()}
    # the phones that lost their replica reload the link: a new session on a live replica
    retried = await asyncio.gather(*(student_votes(base, code, "en", (i + 1) % 3) for i in lost))
    for p in phones:
        try:
            await p.close()
        except Exception:
            pass
    out["retried_acked"] = sum(a is not None for _, a in retried)
    out["retry_errors"] = [e for p, _ in retried for e in p.errors]
    counted_after = sum(int(v) for k, v in r.hgetall(f"poll:{code}:c").items() if k.startswith("2:"))
    out["round2_after"] = {"counted": counted_after,
                           "latency": await projector_total(teacher, counted_after, 10),
                           "projector": teacher.votes()}
    out["teacher_errors"] = teacher.errors
    for p, _ in retried:
        await p.close()
    await teacher.close()
    return out


def test_sixty_students_vote_across_three_replicas_and_redis(school_with_redis):
    school, url = school_with_redis
    out = asyncio.run(asyncio.wait_for(a_class(school, url), 400))
    print(f"\nAsk the class through {REPLICAS} replicas and Redis: {out}")
    assert out["round1_errors"] == [], out["round1_errors"][:5]
    assert out["round1_acked"] == STUDENTS
    assert len(out["round1_cookies"]) == REPLICAS                   # the phones reached every replica
    assert out["round1_window"] <= 10.0
    assert out["round1_latency"] is not None and out["round1_latency"] <= 2.0
    r2 = out["round2"]
    assert out["on_victim"] >= 5 and r2["lost_connection"] >= 1     # the kill did cut phones off
    assert r2["counted"] >= r2["acked"]                             # no acknowledged vote was lost
    assert r2["projector"] == r2["counted"]
    assert r2["counted"] - r2["acked"] <= r2["lost_connection"]     # at most the votes in flight when it died
    after = out["round2_after"]
    assert out["retry_errors"] == [] and out["retried_acked"] == r2["lost_connection"]
    assert after["counted"] == r2["counted"] + out["retried_acked"]
    assert STUDENTS <= after["counted"] <= STUDENTS + r2["lost_connection"]
    assert after["projector"] == after["counted"] and after["latency"] <= 2.0
    assert out["teacher_errors"] == []
