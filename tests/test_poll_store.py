"""The poll store's contract, the same test functions against both stores: the in-process one and Redis (a real
redis-server started for this module). Votes counted exactly once under concurrency, one vote per session per
round, owner-only controls, bounds (rooms, voters, rounds, options, spec size), expiry, and bad votes answered.
About 10 s."""
from __future__ import annotations

import json
import secrets
import threading
import time

import pytest

from serving import poll_store as ps
from tests.redis_server import redis_server

SPEC = {"page": "masking", "exercise": "mask_ex", "lang": "en", "answer": 2,
        "question": {"key": "masking.ex_question", "item": None, "fields": {}, "text": "Q?"},
        "options": [{"key": f"masking.ex_opt{i}", "item": None, "fields": {}, "text": f"o{i}"} for i in range(4)]}


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(params=["memory", "redis"])
def make(request):
    """make(**bounds) -> a new, empty store of the kind under test."""
    def build(**bounds):
        if request.param == "memory":
            return ps.MemoryStore(**bounds)
        url = request.getfixturevalue("redis_url")
        return ps.RedisStore(url, prefix=f"t{secrets.token_hex(4)}", **bounds)
    return build


def test_a_room_opens_with_an_unguessable_code_and_reads_back(make):
    store = make()
    code, token = store.create(SPEC)
    assert ps.normalise_code(code) == code and len(code) == 8 and len(token) >= 24
    codes = {store.create(SPEC)[0] for _ in range(30)}
    assert len(codes) == 30                                       # drawn, not counted up
    state = store.state(code)
    assert state.spec == SPEC and state.round == 1 and state.open and state.show and not state.revealed
    assert state.round_counts() == [0, 0, 0, 0]
    # as typed on a phone: lower case, a dash, spaces
    assert store.state(f" {code[:4].lower()}-{code[4:]} ").code == code
    assert store.rooms() == 31


def test_each_vote_counts_once_per_session_and_round(make):
    store = make()
    code, token = store.create(SPEC)
    assert store.vote(code, 1, "alice", 2) == ps.OK
    assert store.vote(code, 1, "alice", 2) == ps.ALREADY
    assert store.vote(code, 1, "alice", 0) == ps.ALREADY          # no changing the vote either
    assert store.vote(code, 1, "bob", 0) == ps.OK
    assert store.state(code).round_counts() == [1, 0, 1, 0]
    assert store.voted(code, 1, "alice") == 2 and store.voted(code, 1, "carol") is None
    assert store.control(code, token, "next_round") == ps.OK
    assert store.vote(code, 1, "carol", 1) == ps.STALE_ROUND       # a phone still showing round 1
    assert store.vote(code, 2, "alice", 3) == ps.OK                # a new round: everyone votes again
    state = store.state(code)
    assert state.round == 2 and state.round_counts(1) == [1, 0, 1, 0] and state.round_counts() == [0, 0, 0, 1]


def test_concurrent_votes_are_each_counted_exactly_once(make):
    store = make()
    code, _ = store.create(SPEC)
    results: list[str] = []
    lock = threading.Lock()

    def student(i):
        # every session tries twice: the second attempt must be refused, whatever the interleaving
        for _ in range(2):
            r = store.vote(code, 1, f"s{i}", i % 4)
            with lock:
                results.append(r)

    threads = [threading.Thread(target=student, args=(i,)) for i in range(120)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert results.count(ps.OK) == 120 and results.count(ps.ALREADY) == 120
    assert store.state(code).round_counts() == [30, 30, 30, 30]


def test_only_the_owner_controls_the_room(make):
    store = make()
    code, token = store.create(SPEC)
    other_code, other_token = store.create(SPEC)
    for action in ps.ACTIONS:
        assert store.control(code, "not-the-token", action) == ps.FORBIDDEN
        assert store.control(code, other_token, action) == ps.FORBIDDEN    # another room's owner
        assert store.control(code, "", action) == ps.FORBIDDEN
        assert store.control(code, None, action) == ps.FORBIDDEN
    state = store.state(code)
    assert (state.round, state.open, state.show, state.revealed) == (1, True, True, False)
    assert store.control(code, token, "hide") == ps.OK and not store.state(code).show
    assert store.control(code, token, "show") == ps.OK and store.state(code).show
    assert store.control(code, token, "close") == ps.OK and not store.state(code).open
    assert store.vote(code, 1, "late", 0) == ps.CLOSED
    assert store.control(code, token, "next_round") == ps.OK
    assert store.state(code).open and store.vote(code, 2, "late", 0) == ps.OK
    assert store.control(code, token, "reveal") == ps.OK
    state = store.state(code)
    assert state.revealed and not state.open and store.vote(code, 2, "later", 1) == ps.CLOSED
    with pytest.raises(ValueError):
        store.control(code, token, "delete")


def test_bad_votes_are_answered_not_counted(make):
    store = make()
    code, _ = store.create(SPEC)
    assert store.vote(code, 1, "a", 4) == ps.UNKNOWN_OPTION          # 4 options: 0..3
    assert store.vote(code, 1, "a", -1) == ps.UNKNOWN_OPTION
    assert store.vote(code, 1, "a", 99) == ps.UNKNOWN_OPTION
    assert store.vote(code, 1, "a", "1") == ps.UNKNOWN_OPTION
    assert store.vote(code, 1, "a", True) == ps.UNKNOWN_OPTION
    assert store.vote(code, 1, "a", 1.0) == ps.UNKNOWN_OPTION
    for bad in ("", "ZZZZ", "🙂" * 8, "<b>x</b>", "9" * 5000, None, 12, code + "X"):
        assert store.vote(bad, 1, "a", 0) == ps.NO_ROOM
        assert store.state(bad) is None
    missing = next(c for c in (ps.new_code() for _ in range(9)) if c != code)
    assert store.vote(missing, 1, "a", 0) == ps.NO_ROOM and store.state(missing) is None
    assert store.control(missing, "t", "reveal") == ps.NO_ROOM
    assert store.vote(code, 1, "x" * 65, 0) == ps.STALE_ROUND          # not a session id this app makes
    assert store.state(code).round_counts() == [0, 0, 0, 0]


def test_the_number_of_rooms_voters_and_rounds_is_bounded(make):
    store = make(max_rooms=3, max_voters=5, max_rounds=2)
    code, token = store.create(SPEC)
    store.create(SPEC)
    store.create(SPEC)
    with pytest.raises(ps.StoreFull):
        store.create(SPEC)
    assert store.rooms() == 3
    assert [store.vote(code, 1, f"v{i}", 0) for i in range(7)] == [ps.OK] * 5 + [ps.FULL] * 2
    assert store.state(code).round_counts() == [5, 0, 0, 0]
    assert store.control(code, token, "next_round") == ps.OK
    assert store.control(code, token, "next_round") == ps.LAST_ROUND
    assert store.state(code).round == 2


def test_a_spec_is_checked_and_bounded(make):
    store = make()
    with pytest.raises(ValueError):
        store.create({**SPEC, "options": SPEC["options"][:1]})
    with pytest.raises(ValueError):
        store.create({**SPEC, "options": SPEC["options"] * 3})          # 12 > MAX_OPTIONS
    with pytest.raises(ValueError):
        store.create({**SPEC, "answer": 4})
    with pytest.raises(ValueError):
        store.create({**SPEC, "question": {**SPEC["question"], "text": "x" * ps.MAX_SPEC_BYTES}})
    assert store.rooms() == 0


def test_rooms_expire_when_idle_and_free_their_place(make):
    """Times leave a wide margin (a vote every 0.7 s against a 2 s TTL): a loaded machine's late wake-up must not
    expire the active room."""
    store = make(ttl=2.0, max_rooms=2)
    code, token = store.create(SPEC)
    idle, _ = store.create(SPEC)
    for _ in range(4):                        # activity keeps a room: each vote gives it the whole TTL again
        time.sleep(0.7)
        assert store.vote(code, 1, secrets.token_hex(4), 1) == ps.OK
    assert store.state(idle) is None          # the idle one is gone (2.8 s > 2 s)
    assert store.state(code).round_counts() == [0, 4, 0, 0]
    assert store.rooms() == 1
    store.create(SPEC)                        # its place is free again
    time.sleep(2.5)
    assert store.state(code) is None and store.vote(code, 1, "z", 0) == ps.NO_ROOM
    assert store.control(code, token, "reveal") == ps.NO_ROOM
    assert store.rooms() == 0


def test_the_redis_store_keeps_nothing_but_the_room(redis_url):
    """What Redis holds for a room: the spec (catalog keys and app-made numbers), the owner's hash (never the
    token), the round state, the counts and the voters' random ids; every key expires."""
    import redis
    store = ps.RedisStore(redis_url, prefix="inspect")
    code, token = store.create(SPEC)
    store.vote(code, 1, "sess1", 1)
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    keys = sorted(r.keys("inspect:*"))
    assert keys == sorted([f"inspect:{code}", f"inspect:{code}:c", f"inspect:{code}:v", "inspect:rooms"])
    room = r.hgetall(f"inspect:{code}")
    assert set(room) == {"spec", "n", "owner", "round", "open", "show", "revealed", "voters:1"}
    assert json.loads(room["spec"]) == SPEC and room["owner"] == ps.token_hash(token)
    assert token not in json.dumps({k: r.hgetall(k) for k in keys if k != "inspect:rooms"})
    assert r.hgetall(f"inspect:{code}:c") == {"1:1": "1"} and r.hgetall(f"inspect:{code}:v") == {"1:sess1": "1"}
    assert all(0 < r.pttl(k) <= ps.TTL_SECONDS * 1000 for k in keys if k != "inspect:rooms")


def test_an_unreachable_redis_is_an_error_the_page_can_name():
    store = ps.RedisStore("redis://127.0.0.1:9/0")      # port 9 (discard): nothing listens
    with pytest.raises(ps.Unavailable):
        store.create(SPEC)
    with pytest.raises(ps.Unavailable):
        store.state("ABCDEFGH")
