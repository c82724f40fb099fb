"""Shared class state for "Ask the class": the rooms of live polls, in this process or in Redis.

One interface, two stores: ``MemoryStore`` (the default: one server, e.g. Streamlit Community Cloud) keeps the
rooms in a dict behind one lock; ``RedisStore`` (``REDIS_URL`` set: replicas behind a balancer, deploy/) keeps
them in Redis, each change one Lua script, so a vote is checked and counted atomically whichever replica a student
reached. ``store()`` returns the one this process uses. The poll's presentation is ``ui.poll`` (opening a room) and
``ui.poll_room`` (the projector and the phones); this module never imports Streamlit.

What a room holds: the exercise it asks (page key, exercise key, the catalog keys of its question and options and
the numbers filled into them: no text a student typed), the owner's token as a SHA-256 hash, the round, whether
the round is open, the counts shown, the answer revealed; per round the count of each option and the random ids
of the sessions that voted (one vote per session per round). No names, no addresses.

Bounds (a script cannot fill the memory): at most ``MAX_ROOMS`` rooms, ``MAX_VOTERS`` votes per round,
``MAX_ROUNDS`` rounds, ``MAX_OPTIONS`` options, a spec of ``MAX_SPEC_BYTES``. A room expires ``TTL_SECONDS``
(2 h) after its last vote or teacher action. Room codes are 8 characters of a 32-letter alphabet drawn by
``secrets`` (2^40 codes): with 200 rooms open, a guess finds one with probability 2e-10.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass, field

ALPHABET = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"      # no 0/O, 1/I: read off a projector, typed on a phone
CODE_LENGTH = 8
TTL_SECONDS = 2 * 3600
MAX_ROOMS = 200
MAX_VOTERS = 500
MAX_ROUNDS = 5
MAX_OPTIONS = 8
MAX_SPEC_BYTES = 16_384

# what a vote can come to (ui.poll words each one in the learner's language)
OK, ALREADY, CLOSED, STALE_ROUND, UNKNOWN_OPTION, NO_ROOM, FULL = (
    "ok", "already", "closed", "stale_round", "unknown_option", "no_room", "full")
# teacher controls
ACTIONS = ("hide", "show", "close", "next_round", "reveal")
FORBIDDEN = "forbidden"
LAST_ROUND = "last_round"

_CODE = re.compile(f"[{ALPHABET}]{{{CODE_LENGTH}}}")


class StoreFull(Exception):
    """No room can be opened: MAX_ROOMS are open."""


class Unavailable(Exception):
    """The shared store (Redis) cannot be reached."""


def normalise_code(text) -> str | None:
    """A room code as typed or linked ("abcd-2345", " ABCD 2345 ") -> "ABCD2345"; anything else -> None."""
    if not isinstance(text, str) or len(text) > 40:
        return None
    code = re.sub(r"[\s\-]", "", text).upper()
    return code if _CODE.fullmatch(code) else None


def display_code(code: str) -> str:
    return f"{code[:4]}-{code[4:]}"


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass
class RoomState:
    """A room as the projector and a student's phone read it."""
    code: str
    spec: dict
    round: int
    open: bool
    show: bool
    revealed: bool
    counts: dict[int, list[int]] = field(default_factory=dict)    # round -> count per option

    @property
    def n_options(self) -> int:
        return len(self.spec["options"])

    def round_counts(self, rnd: int | None = None) -> list[int]:
        return self.counts.get(self.round if rnd is None else rnd, [0] * self.n_options)

    def total(self, rnd: int | None = None) -> int:
        return sum(self.round_counts(rnd))


def check_spec(spec: dict) -> str:
    """The spec as stored (JSON), or ValueError: options 2..MAX_OPTIONS, an answer among them, bounded size."""
    options = spec.get("options")
    if not isinstance(options, list) or not 2 <= len(options) <= MAX_OPTIONS:
        raise ValueError(f"a poll has 2 to {MAX_OPTIONS} options")
    if not isinstance(spec.get("answer"), int) or not 0 <= spec["answer"] < len(options):
        raise ValueError("the answer is not one of the options")
    text = json.dumps(spec, ensure_ascii=False, sort_keys=True)
    if len(text.encode()) > MAX_SPEC_BYTES:
        raise ValueError(f"a poll's spec is at most {MAX_SPEC_BYTES} bytes")
    return text


class PollStore:
    """The contract both stores keep (tests/test_poll_store.py runs the same tests against each)."""

    def __init__(self, *, ttl: float = TTL_SECONDS, max_rooms: int = MAX_ROOMS, max_voters: int = MAX_VOTERS,
                 max_rounds: int = MAX_ROUNDS):
        self.ttl, self.max_rooms, self.max_voters, self.max_rounds = ttl, max_rooms, max_voters, max_rounds

    def create(self, spec: dict) -> tuple[str, str]:
        """Open a room for ``spec``: (room code, owner token). The token stays in the teacher's session."""
        text = check_spec(spec)
        token = secrets.token_urlsafe(24)
        for _ in range(8):       # a code already in use (2^40 codes: practically never) draws another
            code = new_code()
            if self._create(code, text, len(spec["options"]), token_hash(token)):
                return code, token
        raise StoreFull("no free room code")

    def vote(self, code, rnd: int, voter: str, option) -> str:
        """One vote of session ``voter`` in round ``rnd`` (the round the student saw): OK or why not."""
        code = normalise_code(code)
        if code is None:
            return NO_ROOM
        if isinstance(option, bool) or not isinstance(option, int) or not 0 <= option < MAX_OPTIONS:
            return UNKNOWN_OPTION
        if not isinstance(rnd, int) or not isinstance(voter, str) or not 0 < len(voter) <= 64:
            return STALE_ROUND
        return self._vote(code, rnd, voter, option)

    def control(self, code, token, action: str) -> str:
        """A teacher control (ACTIONS) by the session holding the room's token: OK, FORBIDDEN, NO_ROOM,
        LAST_ROUND."""
        code = normalise_code(code)
        if code is None:
            return NO_ROOM
        if action not in ACTIONS:
            raise ValueError(action)
        if not isinstance(token, str) or not token:
            return FORBIDDEN
        return self._control(code, token_hash(token), action)

    def state(self, code) -> RoomState | None:
        code = normalise_code(code)
        return None if code is None else self._state(code)

    def voted(self, code, rnd: int, voter: str) -> int | None:
        """The option this session chose in round ``rnd``, or None."""
        code = normalise_code(code)
        return None if code is None else self._voted(code, rnd, voter)

    def rooms(self) -> int:
        """Rooms open now (not expired)."""
        raise NotImplementedError

    # each store implements these, atomically
    def _create(self, code: str, spec: str, n: int, owner: str) -> bool: ...
    def _vote(self, code: str, rnd: int, voter: str, option: int) -> str: ...
    def _control(self, code: str, owner: str, action: str) -> str: ...
    def _state(self, code: str) -> RoomState | None: ...
    def _voted(self, code: str, rnd: int, voter: str) -> int | None: ...


# ----------------------------------------------------------------------------------------- in this process

@dataclass
class _Room:
    spec: dict
    n: int
    owner: str
    expires: float
    round: int = 1
    open: bool = True
    show: bool = True
    revealed: bool = False
    counts: dict = field(default_factory=dict)      # round -> list of counts
    voters: dict = field(default_factory=dict)      # (round, voter) -> option


class MemoryStore(PollStore):
    """The rooms in a dict behind one lock (Streamlit runs each session's script in its own thread)."""

    def __init__(self, **bounds):
        super().__init__(**bounds)
        self._rooms: dict[str, _Room] = {}
        self._lock = threading.Lock()

    def _live(self, code: str) -> _Room | None:
        room = self._rooms.get(code)
        if room is not None and room.expires <= time.monotonic():
            del self._rooms[code]
            return None
        return room

    def _purge(self) -> None:
        now = time.monotonic()
        for code in [c for c, r in self._rooms.items() if r.expires <= now]:
            del self._rooms[code]

    def _touch(self, room: _Room) -> None:
        room.expires = time.monotonic() + self.ttl

    def rooms(self) -> int:
        with self._lock:
            self._purge()
            return len(self._rooms)

    def _create(self, code, spec, n, owner):
        with self._lock:
            self._purge()
            if len(self._rooms) >= self.max_rooms:
                raise StoreFull(f"{self.max_rooms} rooms are open")
            if code in self._rooms:
                return False
            self._rooms[code] = _Room(json.loads(spec), n, owner, time.monotonic() + self.ttl,
                                      counts={1: [0] * n})
            return True

    def _vote(self, code, rnd, voter, option):
        with self._lock:
            room = self._live(code)
            if room is None:
                return NO_ROOM
            if rnd != room.round:
                return STALE_ROUND
            if not room.open or room.revealed:
                return CLOSED
            if option >= room.n:
                return UNKNOWN_OPTION
            if (rnd, voter) in room.voters:
                return ALREADY
            counts = room.counts.setdefault(rnd, [0] * room.n)
            if sum(counts) >= self.max_voters:
                return FULL
            room.voters[(rnd, voter)] = option
            counts[option] += 1
            self._touch(room)
            return OK

    def _control(self, code, owner, action):
        with self._lock:
            room = self._live(code)
            if room is None:
                return NO_ROOM
            if not hmac.compare_digest(room.owner, owner):
                return FORBIDDEN
            if action == "next_round":
                if room.round >= self.max_rounds:
                    return LAST_ROUND
                room.round += 1
                room.open, room.revealed = True, False
                room.counts[room.round] = [0] * room.n
            elif action == "close":
                room.open = False
            elif action == "reveal":
                room.open, room.revealed = False, True
            else:
                room.show = action == "show"
            self._touch(room)
            return OK

    def _state(self, code):
        with self._lock:
            room = self._live(code)
            if room is None:
                return None
            return RoomState(code, room.spec, room.round, room.open, room.show, room.revealed,
                             {r: list(c) for r, c in room.counts.items()})

    def _voted(self, code, rnd, voter):
        with self._lock:
            room = self._live(code)
            return None if room is None else room.voters.get((rnd, voter))


# ------------------------------------------------------------------------------------------------ in Redis
# Keys of room CODE: poll:CODE (a hash: spec, owner, n, round, open, show, revealed), poll:CODE:c (a hash: "round:
# option" -> count), poll:CODE:v (a hash: "round:voter" -> option); and poll:rooms, a sorted set of the open rooms
# by the time of their last change (to count them). Each change is one script: Redis runs a script alone, so the
# checks and the counting are one step, and every key of the room gets the TTL again (they expire together).

_LUA_CREATE = """
local now, ttl_ms = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - ttl_ms)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then return 'full' end
if redis.call('EXISTS', KEYS[1]) == 1 then return 'taken' end
redis.call('HSET', KEYS[1], 'spec', ARGV[4], 'n', ARGV[5], 'owner', ARGV[6], 'round', 1, 'open', 1, 'show', 1,
           'revealed', 0, 'voters:1', 0)
redis.call('PEXPIRE', KEYS[1], ttl_ms)
redis.call('ZADD', KEYS[2], now, ARGV[7])
return 'ok'
"""

_LUA_VOTE = """
-- KEYS: room, counts, voters, rooms; ARGV: round, voter, option, now, ttl_ms, max_voters, code
local m = redis.call('HMGET', KEYS[1], 'round', 'open', 'n', 'revealed')
if not m[1] then return 'no_room' end
local rnd = ARGV[1]
if rnd ~= m[1] then return 'stale_round' end
if m[2] ~= '1' or m[4] == '1' then return 'closed' end
local option = tonumber(ARGV[3])
if option >= tonumber(m[3]) then return 'unknown_option' end
local who = rnd .. ':' .. ARGV[2]
if redis.call('HEXISTS', KEYS[3], who) == 1 then return 'already' end
if tonumber(redis.call('HGET', KEYS[1], 'voters:' .. rnd) or '0') >= tonumber(ARGV[6]) then return 'full' end
redis.call('HSET', KEYS[3], who, ARGV[3])
redis.call('HINCRBY', KEYS[2], rnd .. ':' .. ARGV[3], 1)
redis.call('HINCRBY', KEYS[1], 'voters:' .. rnd, 1)
local ttl_ms = tonumber(ARGV[5])
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ttl_ms) end
redis.call('ZADD', KEYS[4], tonumber(ARGV[4]), ARGV[7])
return 'ok'
"""

_LUA_CONTROL = """
-- KEYS: room, counts, voters, rooms; ARGV: owner hash, action, now, ttl_ms, max_rounds, code
local m = redis.call('HMGET', KEYS[1], 'owner', 'round')
if not m[1] then return 'no_room' end
if m[1] ~= ARGV[1] then return 'forbidden' end
local action = ARGV[2]
if action == 'next_round' then
  local rnd = tonumber(m[2])
  if rnd >= tonumber(ARGV[5]) then return 'last_round' end
  redis.call('HSET', KEYS[1], 'round', rnd + 1, 'open', 1, 'revealed', 0, 'voters:' .. (rnd + 1), 0)
elseif action == 'close' then
  redis.call('HSET', KEYS[1], 'open', 0)
elseif action == 'reveal' then
  redis.call('HSET', KEYS[1], 'open', 0, 'revealed', 1)
elseif action == 'show' then
  redis.call('HSET', KEYS[1], 'show', 1)
else
  redis.call('HSET', KEYS[1], 'show', 0)
end
local ttl_ms = tonumber(ARGV[4])
for i = 1, 3 do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('PEXPIRE', KEYS[i], ttl_ms) end
end
redis.call('ZADD', KEYS[4], tonumber(ARGV[3]), ARGV[6])
return 'ok'
"""


class RedisStore(PollStore):
    """The rooms in Redis: every replica behind the balancer sees the same rooms."""

    def __init__(self, url: str, prefix: str = "poll", **bounds):
        super().__init__(**bounds)
        import redis  # only a deployment with REDIS_URL needs the client

        self._errors = (redis.RedisError, OSError)
        # sessions of a replica share a bounded pool: past 32 calls at once a call waits (up to 5 s) for a connection
        pool = redis.BlockingConnectionPool.from_url(url, decode_responses=True, socket_timeout=3,
                                                     socket_connect_timeout=3, health_check_interval=30,
                                                     max_connections=32, timeout=5)
        self._redis = redis.Redis(connection_pool=pool)
        self._p = prefix
        self._create_lua = self._redis.register_script(_LUA_CREATE)
        self._vote_lua = self._redis.register_script(_LUA_VOTE)
        self._control_lua = self._redis.register_script(_LUA_CONTROL)

    def _keys(self, code: str) -> list[str]:
        return [f"{self._p}:{code}", f"{self._p}:{code}:c", f"{self._p}:{code}:v", f"{self._p}:rooms"]

    def _ms(self) -> int:
        return int(self.ttl * 1000)

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except self._errors as e:
            raise Unavailable(str(e)) from e

    def rooms(self) -> int:
        key = f"{self._p}:rooms"
        now = int(time.time() * 1000)
        self._call(self._redis.zremrangebyscore, key, "-inf", now - self._ms())
        return int(self._call(self._redis.zcard, key))

    def _create(self, code, spec, n, owner):
        keys = self._keys(code)
        result = self._call(self._create_lua, keys=[keys[0], keys[3]],
                            args=[int(time.time() * 1000), self._ms(), self.max_rooms, spec, n, owner, code])
        if result == "full":
            raise StoreFull(f"{self.max_rooms} rooms are open")
        return result == "ok"

    def _vote(self, code, rnd, voter, option):
        return self._call(self._vote_lua, keys=self._keys(code),
                          args=[rnd, voter, option, int(time.time() * 1000), self._ms(), self.max_voters, code])

    def _control(self, code, owner, action):
        return self._call(self._control_lua, keys=self._keys(code),
                          args=[owner, action, int(time.time() * 1000), self._ms(), self.max_rounds, code])

    def _state(self, code):
        room, counts_key, _, _ = self._keys(code)
        pipe = self._redis.pipeline(transaction=True)       # one consistent snapshot of the room and its counts
        pipe.hmget(room, "spec", "round", "open", "show", "revealed")
        pipe.hgetall(counts_key)
        (spec, rnd, is_open, show, revealed), raw = self._call(pipe.execute)
        if spec is None:
            return None
        spec = json.loads(spec)
        n, rnd = len(spec["options"]), int(rnd)
        counts = {r: [0] * n for r in range(1, rnd + 1)}
        for name, value in raw.items():
            r, _, option = name.partition(":")
            if int(r) in counts and 0 <= int(option) < n:
                counts[int(r)][int(option)] = int(value)
        return RoomState(code, spec, rnd, is_open == "1", show == "1", revealed == "1", counts)

    def _voted(self, code, rnd, voter):
        value = self._call(self._redis.hget, self._keys(code)[2], f"{rnd}:{voter}")
        return None if value is None else int(value)


# ---------------------------------------------------------------------------------------- the process's store

_STORE: PollStore | None = None
_STORE_LOCK = threading.Lock()


def store() -> PollStore:
    """Redis when ``REDIS_URL`` is set (replicas share it), else this process's rooms."""
    global _STORE
    if _STORE is None:
        with _STORE_LOCK:
            if _STORE is None:
                url = os.environ.get("REDIS_URL", "").strip()
                _STORE = RedisStore(url) if url else MemoryStore()
    return _STORE
