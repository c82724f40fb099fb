"""Peak memory of one real server under a class (docs/performance.md, "Memory": <= 700 MB RSS at every moment).

    python scripts/bench_memory.py                      # the four scenarios, one server, this checkout
    python scripts/bench_memory.py --root /tmp/old      # the same against another checkout (before / after)
    python scripts/bench_memory.py --only a,b --json out.json

Starts ``streamlit run app.py --server.port <free port> --server.headless true`` on localhost, opens
sessions over Streamlit's own websocket protocol (a BackMsg ``rerun_script`` with the page and its query
string, then ForwardMsgs until ``script_finished``: what a browser tab does, without the browser), and
samples the server's RSS (its process and any children, psutil) every 50 ms. Scenarios, in this order on
the same server (caches fill up as they would over a lesson):

  (a) every page at its defaults, one session each;
  (b) each page's largest inputs a URL can set (the controls' maxima: longest text the controls accept,
      most heads / d_model / tokens / layers / features ...), one URL at a time, every tab of tabbed pages;
  (c) 80 varied heavy requests in a row (the URLs of (b) with new seeds and new texts each time);
  (d) 10 sessions on heavy inputs at once (new seeds and texts again).

For each it prints the peak RSS during the scenario and the RSS when it ends. A request that does not finish
within ``--timeout`` seconds is reported, not waited for. Loopback only; every loop is bounded; the server
is stopped at the end (also on Ctrl-C). Not a unit test.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import random
import sys
import threading
import time
import urllib.parse
import urllib.request

import psutil

HERE = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))
from scripts.server import free_port, start_server, stop_server  # noqa: E402  (the one way to start a server)

BUDGET_MB = 700
SAMPLE_S = 0.05

WORDS = ("the cat sat on a mat while it was raining and the dog barked at every passing car near old stone "
         "bridge river quiet morning light students read books about attention heads queries keys values "
         "softmax tokens layers model weights train test small large fast slow red green blue yellow "
         "house tree garden window door table chair").split()
ZH = "猫坐在垫子上因为下雨了狗对着每一辆经过的车叫学生们读关于注意力机制的书"


def sentence(rng: random.Random, n: int, zh: bool = False) -> str:
    if zh:
        return "".join(rng.choice(ZH) for _ in range(n))
    return " ".join(rng.choice(WORDS) for _ in range(n)) + f" {rng.randrange(10**6)}"


def tab_labels(root: pathlib.Path) -> dict[str, dict[str, str]]:
    """The English tab titles (a tab is opened from the URL by its title)."""
    import tomllib
    out = {}
    for page in ("multihead", "qkv", "efficiency", "masking"):
        data = tomllib.loads((root / "assets" / "i18n" / "en" / f"{page}.toml").read_text())
        data = data.get(page, data)
        out[page] = {k[4:]: v for k, v in data.items() if k.startswith("tab_") and isinstance(v, str)}
    return out


PAGES = ("home", "qkv", "scaling", "masking", "multihead", "positional", "encoder", "cross_attention", "efficiency",
         "bottleneck", "alignment", "pronoun", "analysis", "training", "summary", "glossary",
         "kv_cache", "gqa", "attention_sinks", "long_context", "qk_norm", "induction_heads", "pretrained")


def heavy_requests(root: pathlib.Path, rng: random.Random) -> list[tuple[str, dict]]:
    """(page, query params) at the largest values the page's controls take; texts and seeds from ``rng``."""
    tabs = tab_labels(root)
    seed = lambda: str(rng.randrange(10000))                                            # noqa: E731
    s = lambda n: sentence(rng, n)                                                      # noqa: E731
    out: list[tuple[str, dict]] = []
    q = tabs["qkv"]
    out += [("qkv", {"tab": q["kernel"], "h": "0.05", "n": "100", "noise": "1.5", "x": "5.0"}),
            ("qkv", {"tab": q["library"], "dm": "64", "dk": "64", "seed": seed()}),
            ("qkv", {"tab": q["tokens"], "text": s(70), "dm": "64", "dk": "64", "seed": seed()}),
            ("qkv", {"tab": q["similarity"], "text": s(70), "cdk": "1024", "hid": "64", "seed": seed()})]
    out += [("scaling", {"dk": "1024", "tau": "0.125", "scale": "false"})]
    batch = "\n".join(s(12) for _ in range(6))
    m = tabs["masking"]
    out += [("masking", {"batch": batch, "tab": m[k], "cm": s(12)}) for k in ("padding", "causal", "custom")]
    mh = tabs["multihead"]
    for k in ("heads", "shapes", "compare", "gallery", "geometry"):
        out.append(("multihead", {"text": s(70), "h": "32", "d": "256", "seed": seed(), "mode": "random",
                                  "tab": mh[k]}))
    out += [("positional", {"n": "128", "d": "128", "base": "100000", "pair": "63", "text": s(30), "m": "200",
                            "j": "200", "s": "1000", "shuf": seed(), "enc": "rotary"})]
    out += [("encoder", {"text": s(30), "d": "64", "h": "8", "L": "12", "p": "0.9", "seed": seed(), "ln": "pre"})]
    out += [("cross_attention", {"mode": "random", "dm": "128", "src": s(30), "tgt": s(40), "patch": "16",
                                 "heads": "4", "words": s(14), "sharp": "40.0", "seed": seed()})]
    e = tabs["efficiency"]
    for v in ("performer", "linformer", "bigbird", "longformer", "block_global"):
        out.append(("efficiency", {"tab": e["approx"], "src": "random", "n": "64", "v": v, "m": "512", "k": "64",
                                   "block": "32", "glob": "4", "rnd": "8", "win": "32", "stride": "32",
                                   "seed": seed()}))
    out += [("efficiency", {"tab": e["cost"], "seed": seed()}),
            ("efficiency", {"tab": e["flash"], "src": "random", "n": "64", "bq": "1", "bk": "1", "fc": "true",
                            "step": "64", "tile": "4096", "seed": seed()}),
            ("efficiency", {"tab": e["flash"], "src": "text", "text": s(40), "bq": "1", "bk": "1", "tile": "32"}),
            ("efficiency", {"tab": e["rnn"], "src": "random", "n": "64", "rnn_step": "64", "seed": seed()}),
            ("efficiency", {"tab": e["tips"], "ck_n": "64", "ck_L": "4", "ck_bf16": "true", "mp_gain": "8.0",
                            "seed": seed()})]
    digits = "".join(str(rng.randrange(10)) for _ in range(60))
    out += [("bottleneck", {"own": "true", "digits": digits, "len": "60", "dec_step": "65", "per_char": "true"})]
    out += [("alignment", {"date": f"{rng.randrange(1, 29)} March {rng.randrange(1950, 2050)} " + s(60)[:300],
                           "forms": ["Month D, YYYY", "D Mon YY", "YYYY/MM/DD", "YYYY年M月D日 · 〇一二三",
                                     "Weekday, Month Dth YYYY", "YYYY年M月D日星期W"]})]
    out += [("pronoun", {"src": "type", "text": s(60), "n": "500"})]
    out += [("analysis", {"b": "512", "tau": "0.5", "mix": "both", "norm": "true", "text": s(70)})]
    out += [("pretrained", {"pt_text": s(70), "pt_layer": "6", "pt_head": "12", "pt_pit": "true"})]   # 64 tokens
    out += [("training", {"steps": "600", "every": "5", "probe_reverse": digits[:40]})]
    out += [("glossary", {"q": s(70)[:400]}), ("summary", {})]
    # the modern section: the largest model configuration, longest inputs and most layers its controls take
    out += [("kv_cache", {"prompt": "16", "new": "16", "seed": seed(), "layers": "128", "d_head": "256",
                          "kv_heads": "128", "tokens": str(2 ** 20), "dtype": "float32"}),
            ("gqa", {"heads": "32", "kv_heads": "1", "d_latent": "128"}),
            ("attention_sinks", {"n": "48", "window": "1", "layers": "6", "sinks": "4", "seed": seed(),
                                 "cache": "8", "length": "256"}),
            ("long_context", {"method": "RoPE+YaRN", "n": "256", "head": "4"}),
            ("qk_norm", {"factor": "30", "live_qk": "true", "live_lr": "1.0"}),
            ("induction_heads", {"data_seed": seed(), "train_seed": seed(), "half": "20"})]
    return out


# ------------------------------------------------------------------ the websocket client (what a browser tab sends)
async def run_session(port: int, page: str, params: dict, timeout: float) -> dict:
    """Open a session, run ``page`` with ``params``, wait for script_finished; counts of messages/exceptions."""
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    query = urllib.parse.urlencode({"lang": "en", **params}, doseq=True)
    msg = BackMsg()
    msg.rerun_script.query_string = query
    msg.rerun_script.page_name = "" if page == "home" else page
    msg.rerun_script.context_info.locale = "en-US"
    msg.rerun_script.context_info.timezone = "UTC"
    t0 = time.perf_counter()
    stats = {"page": page, "messages": 0, "exceptions": 0, "finished": False}
    try:
        async with websockets.connect(f"ws://127.0.0.1:{port}/_stcore/stream", subprotocols=["streamlit"],
                                      max_size=None, open_timeout=timeout, ping_interval=None) as ws:
            await ws.send(msg.SerializeToString())
            deadline = time.perf_counter() + timeout
            while time.perf_counter() < deadline:
                try:
                    raw = await asyncio.wait_for(ws.recv(), timeout=max(0.1, deadline - time.perf_counter()))
                except asyncio.TimeoutError:
                    break
                if not isinstance(raw, bytes):
                    continue
                fwd = ForwardMsg()
                fwd.ParseFromString(raw)
                stats["messages"] += 1
                kind = fwd.WhichOneof("type")
                if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element" \
                        and fwd.delta.new_element.WhichOneof("type") == "exception":
                    stats["exceptions"] += 1
                if kind == "script_finished":
                    if fwd.script_finished in (ForwardMsg.FINISHED_SUCCESSFULLY,
                                               ForwardMsg.FINISHED_WITH_COMPILE_ERROR):
                        stats["finished"] = True
                        break
    except Exception as exc:  # a refused or dropped connection is reported, not raised
        stats["error"] = f"{type(exc).__name__}: {exc}"[:200]
    stats["seconds"] = round(time.perf_counter() - t0, 2)
    return stats


class Sampler(threading.Thread):
    """Samples the RSS of the server and its children every 50 ms; ``peak_since(mark)`` reads the peak."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.samples: list[tuple[float, float]] = []
        self.stop = threading.Event()

    def rss_mb(self) -> float:
        total = 0
        for p in [self.proc, *self.proc.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total / 2**20

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.samples.append((time.perf_counter(), self.rss_mb()))
            except psutil.Error:
                return
            self.stop.wait(SAMPLE_S)

    def peak_since(self, t0: float) -> float:
        return max((mb for t, mb in self.samples if t >= t0), default=0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=pathlib.Path, default=HERE, help="checkout to run (default: this one)")
    ap.add_argument("--only", default="a,b,c,d", help="scenarios to run, e.g. a,b")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per request")
    ap.add_argument("--requests", type=int, default=80, help="length of scenario (c)")
    ap.add_argument("--sessions", type=int, default=10, help="concurrent sessions of scenario (d)")
    ap.add_argument("--json", type=pathlib.Path)
    a = ap.parse_args()
    root = a.root.resolve()
    only = set(a.only.split(","))
    port = free_port()
    proc = start_server(root, port)
    sampler = Sampler(proc.pid)
    sampler.start()
    results: dict = {"root": str(root), "budget_mb": BUDGET_MB, "scenarios": {}}
    failures: list[dict] = []

    def scenario(name: str, what: str, batches: list[list[tuple[str, dict]]]) -> None:
        t0 = time.perf_counter()
        slowest = None
        for batch in batches:
            async def go(batch=batch):
                return await asyncio.gather(*(run_session(port, p, q, a.timeout) for p, q in batch))
            for st in asyncio.run(go()):
                if not st["finished"] or st["exceptions"] or "error" in st:
                    failures.append({"scenario": name, **st})
                if slowest is None or st["seconds"] > slowest["seconds"]:
                    slowest = st
        time.sleep(0.5)
        row = {"what": what, "peak_mb": round(sampler.peak_since(t0), 1), "end_mb": round(sampler.rss_mb(), 1),
               "requests": sum(len(b) for b in batches), "seconds": round(time.perf_counter() - t0, 1),
               "slowest": f"{slowest['page']} {slowest['seconds']} s" if slowest else None}
        results["scenarios"][name] = row
        flag = "" if row["peak_mb"] <= BUDGET_MB else "  OVER BUDGET"
        print(f"({name}) {what:48s} peak {row['peak_mb']:7.1f} MB  end {row['end_mb']:7.1f} MB  "
              f"{row['requests']:3d} requests in {row['seconds']:6.1f} s (slowest {row['slowest']}){flag}",
              flush=True)

    try:
        time.sleep(0.5)
        results["idle_mb"] = round(sampler.rss_mb(), 1)
        print(f"server on 127.0.0.1:{port} ({root}); idle RSS {results['idle_mb']} MB; budget {BUDGET_MB} MB",
              flush=True)
        rng = random.Random(0)
        if "a" in only:
            scenario("a", "every page at its defaults", [[(p, {})] for p in PAGES])
        if "b" in only:
            scenario("b", "each page's largest inputs, one at a time",
                     [[r] for r in heavy_requests(root, rng)])
        if "c" in only:
            reqs: list[tuple[str, dict]] = []
            while len(reqs) < a.requests:                    # new seeds and texts for every pass
                reqs += heavy_requests(root, rng)
            rng.shuffle(reqs)
            scenario("c", f"{a.requests} varied heavy requests in a row", [[r] for r in reqs[:a.requests]])
        if "d" in only:
            pool = [r for r in heavy_requests(root, rng) if r[0] in ("multihead", "analysis", "efficiency", "encoder",
                                                                     "qkv", "pronoun", "positional")]
            rng.shuffle(pool)
            scenario("d", f"{a.sessions} heavy sessions at once", [pool[:a.sessions]])
    finally:
        sampler.stop.set()
        stop_server(proc)
    results["overall_peak_mb"] = round(max((mb for _, mb in sampler.samples), default=0.0), 1)
    results["failures"] = failures
    print(f"overall peak {results['overall_peak_mb']} MB (budget {BUDGET_MB} MB)")
    for f in failures[:20]:
        print("  request did not finish cleanly:", json.dumps(f)[:300])
    if a.json:
        a.json.write_text(json.dumps(results, indent=2))
    return 0 if results["overall_peak_mb"] <= BUDGET_MB and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
