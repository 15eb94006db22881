#!/usr/bin/env python3
"""Open-loop RAG load against `hypic serve` over HTTP: TTFT per (mode, arrival rate).

A pool of --docs documents (generated text of about --doc-tokens tokens each). Each request
picks --per-request of them (Zipf popularity, exponent --zipf, without replacement) in random
order, sends them as segment content parts ("cache_control": {"type": "segment"}) of the last
user message followed by a question, streaming, greedy, --max-tokens tokens, and
"hypic": {"mode": M} in the body. Arrivals are Poisson at each rate of --rates (open loop: a
request is sent at its arrival time whatever the server is doing); --requests requests per
rate after --warmup sequential warm-up requests per mode. TTFT is measured by the client:
from just before the request is sent to the first streamed chunk that carries text (or the
finish reason). Recorded next to it: the server's own figure (usage.hypic.ttft_ms, from the
request's arrival at the handler to the first token, queueing included; client minus server
is the HTTP/SSE overhead), and the time to the first event (the role chunk, which the server
writes before the job runs: the HTTP path alone).

Two ways to run:
  --model DIR --hypic-bin PATH   start a fresh `hypic serve` per mode (so no cache carries
                                 from one mode to the next), stop it after the mode's rates;
                                 within a mode the caches carry from rate to rate (steady state
                                 after the warm-up). With --restart rate: a fresh server per
                                 (mode, rate), each rate after its own warm-up from empty caches.
  --url http://HOST:PORT         an already running server; modes (or rates) are kept apart by
                                 a fresh cache_salt (note: the prefix cache of hypic builds up to
                                 this one ignores cache_salt, so prefix mode starts with whatever
                                 earlier runs against the same server left there).
Both modes see the same request stream (same seed): the same warm-up and measured requests.

Output: one JSON document on stdout (progress on stderr): per (mode, rate) p50/p90/p99 of the
client TTFT and of the server TTFT, HTTP overhead, hits, 429s; per mode the highest rate whose
p90 TTFT is within --slo seconds; the ratio of those rates hypic/prefix; an idle (one request at
a time, warm) comparison of client TTFT, server TTFT and, with --hypic-bin and --model, the
in-process TTFT of the same request (`hypic run --segment ... --repeat`).

Standard library only. Example (small):
  python3 bench/serve_bench.py --model tests/models/qwen3_5_dense --hypic-bin build/hypic \\
      --dtype f32 --docs 8 --doc-tokens 64 --per-request 3 --rates 2,8 --requests 20
"""
import argparse
import http.client
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

WORDS = (
    "the river valley mountain city harbour market engine signal protocol archive library "
    "village forest winter summer north south east west ancient modern council treaty merchant "
    "railway bridge tunnel canal factory harvest grain copper silver iron coal weaver baker "
    "sailor pilot surveyor astronomer chemist physician teacher student record ledger census "
    "storm drought flood frost meadow orchard vineyard quarry mill tower gate wall road square "
    "cathedral theatre museum observatory laboratory hospital school court prison barracks "
    "was were is are had has built opened closed measured recorded traded carried shipped "
    "repaired founded moved grew declined expanded reported noted found named described "
    "in on at by with from after before during under over near between across through "
    "a an its their his her this that these those many several few some every each "
    "large small old new early late quiet busy narrow wide deep shallow steep gentle "
    "first second third hundred thousand year month day season century decade morning evening"
).split()

QUESTIONS = [
    "Which of these documents mentions a harbour, and what was built there?",
    "Summarise what the documents say about trade.",
    "What happened during the winter according to the documents?",
    "List the places named in the documents.",
    "Which document is the oldest, and why do you think so?",
    "What do the documents say about the river?",
    "Compare the first and the last document in two sentences.",
    "Who is mentioned most often in these documents?",
]

_PORT_RE = re.compile(r"hypic serve: model '([^']*)' on http://([0-9.]+):(\d+)")


def log(msg):
    sys.stderr.write("[serve_bench %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


# ---------------------------------------------------------------- statistics

def percentile(xs, q):
    """Linear-interpolated percentile (q in [0, 100]); inf values (failures) sort last."""
    if not xs:
        return None
    s = sorted(xs)
    pos = (len(s) - 1) * q / 100.0
    lo, hi = int(math.floor(pos)), int(math.ceil(pos))
    if math.isinf(s[hi]):
        return s[lo] if pos == lo else math.inf
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def finite_or_none(x, nd=4):
    if x is None or (isinstance(x, float) and (math.isinf(x) or math.isnan(x))):
        return None
    return round(x, nd)


def summary(xs, nd=4):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    fin = [x for x in xs if not math.isinf(x)]
    return {"p50": finite_or_none(percentile(xs, 50), nd), "p90": finite_or_none(percentile(xs, 90), nd),
            "p99": finite_or_none(percentile(xs, 99), nd),
            "mean": finite_or_none(sum(fin) / len(fin), nd) if fin else None,
            "max": finite_or_none(max(fin), nd) if fin else None, "n": len(xs)}


# ---------------------------------------------------------------- documents and requests

def make_doc(rng, n_words, i):
    out, sentence = ["Record %d." % i], []
    for _ in range(n_words):
        sentence.append(rng.choice(WORDS))
        if len(sentence) >= rng.randint(8, 16):
            out.append(" ".join(sentence).capitalize() + ".")
            sentence = []
    if sentence:
        out.append(" ".join(sentence).capitalize() + ".")
    return " ".join(out)


def zipf_pick(rng, weights, k):
    """k distinct indices, drawn by weight without replacement, in random order."""
    idx = list(range(len(weights)))
    w = list(weights)
    picked = []
    for _ in range(min(k, len(idx))):
        r = rng.random() * sum(w)
        acc = 0.0
        for j, wj in enumerate(w):
            acc += wj
            if r <= acc:
                break
        picked.append(idx.pop(j))
        w.pop(j)
    rng.shuffle(picked)
    return picked


class Workload:
    def __init__(self, args, docs):
        self.args = args
        self.docs = docs
        self.weights = [1.0 / (r + 1) ** args.zipf for r in range(len(docs))]

    def request(self, rng, serial):
        picks = zipf_pick(rng, self.weights, self.args.per_request)
        q = "%s (request %d)" % (rng.choice(QUESTIONS), serial)
        return picks, q

    def body(self, model, mode, salt, picks, question):
        parts = [{"type": "text", "text": self.docs[i], "cache_control": {"type": "segment"}} for i in picks]
        parts.append({"type": "text", "text": question})
        b = {"model": model, "temperature": 0, "max_tokens": self.args.max_tokens, "stream": True,
             "stream_options": {"include_usage": True}, "hypic": {"mode": mode},
             "messages": [{"role": "system", "content": self.args.system},
                          {"role": "user", "content": parts}]}
        if self.args.seam is not None:
            b["hypic"]["seam"] = self.args.seam
        if salt:
            b["cache_salt"] = salt
        return b


# ---------------------------------------------------------------- HTTP

class Target:
    def __init__(self, url, api_key):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port or 80
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = "Bearer " + api_key

    def get_json(self, path, timeout=10):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            c.request("GET", path, headers=self.headers)
            r = c.getresponse()
            return r.status, json.loads(r.read() or b"null")
        finally:
            c.close()

    def post_json(self, path, body, timeout=120):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            c.request("POST", path, body=json.dumps(body), headers=self.headers)
            r = c.getresponse()
            return r.status, json.loads(r.read() or b"null")
        finally:
            c.close()

    def stream_chat(self, body, timeout):
        """One streaming chat request. Returns a dict of timings and usage."""
        res = {"status": None, "ttfb_s": None, "ttft_s": None, "e2e_s": None, "usage": None, "error": None,
               "text": ""}
        payload = json.dumps(body)
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        t0 = time.perf_counter()
        try:
            c.request("POST", "/v1/chat/completions", body=payload, headers=self.headers)
            r = c.getresponse()
            res["status"] = r.status
            if r.status != 200:
                raw = r.read()
                try:
                    res["error"] = json.loads(raw).get("error", {}).get("code") or str(r.status)
                except ValueError:
                    res["error"] = str(r.status)
                return res
            while True:
                line = r.readline()
                if not line:
                    break
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if res["ttfb_s"] is None:  # the role chunk: sent before the job has run
                    res["ttfb_s"] = time.perf_counter() - t0
                if data == b"[DONE]":
                    break
                ev = json.loads(data)
                if "error" in ev:
                    res["error"] = ev["error"].get("code") or "stream_error"
                    break
                if ev.get("usage"):
                    res["usage"] = ev["usage"]
                for ch in ev.get("choices") or []:
                    content = (ch.get("delta") or {}).get("content")
                    if res["ttft_s"] is None and (content or ch.get("finish_reason")):
                        res["ttft_s"] = time.perf_counter() - t0
                    if content:
                        res["text"] += content
            res["e2e_s"] = time.perf_counter() - t0
        except (OSError, http.client.HTTPException, ValueError) as e:
            res["error"] = type(e).__name__ + ": " + str(e)
        finally:
            c.close()
        return res


# ---------------------------------------------------------------- the server process

class Server:
    def __init__(self, args, log_dir, tag):
        self.args = args
        self.cmd = [args.hypic_bin, "serve", "--model", args.model, "--port", "0", "--dtype", args.dtype,
                    "--max-concurrency", str(args.max_concurrency), "--max-queue", str(args.max_queue),
                    "--cache-mem", str(args.cache_mem)] + list(args.server_arg or [])
        if args.api_key:
            self.cmd += ["--api-key", args.api_key]
        self.log_path = os.path.join(log_dir, "serve-%s.log" % tag)
        self.proc = None
        self.url = None

    def start(self, timeout=600):
        log("starting: " + " ".join(self.cmd) + "  (log: %s)" % self.log_path)
        self.logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.logf)
        deadline = time.monotonic() + timeout
        while True:
            with open(self.log_path, "r", errors="replace") as f:
                m = _PORT_RE.search(f.read())
            if m:
                self.model_name = m.group(1)
                self.url = "http://%s:%s" % (m.group(2), m.group(3))
                break
            if self.proc.poll() is not None:
                with open(self.log_path, "r", errors="replace") as f:
                    raise SystemExit("hypic serve exited (%d) before listening:\n%s" % (self.proc.returncode, f.read()))
            if time.monotonic() > deadline:
                self.stop()
                raise SystemExit("hypic serve did not start within %d s" % timeout)
            time.sleep(0.05)
        t = Target(self.url, self.args.api_key)
        while True:
            try:
                st, _ = t.get_json("/health", timeout=2)
                if st == 200:
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise SystemExit("/health did not answer")
            time.sleep(0.05)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.logf.close()
            log("server stopped (exit %s)" % self.proc.returncode)
        self.proc = None


# ---------------------------------------------------------------- phases

def one_row(res):
    u = res.get("usage") or {}
    h = u.get("hypic") or {}
    return {"status": res["status"], "error": res["error"], "ttfb_s": res["ttfb_s"], "ttft_s": res["ttft_s"],
            "e2e_s": res["e2e_s"],
            "server_ttft_s": (h["ttft_ms"] / 1000.0) if "ttft_ms" in h else None,
            "mode": h.get("mode"), "segments_hit": h.get("segments_hit"), "segments_missed": h.get("segments_missed"),
            "prompt_tokens": u.get("prompt_tokens"),
            "cached_tokens": (u.get("prompt_tokens_details") or {}).get("cached_tokens")}


def run_rate(target, wl, model, mode, salt, rate, n, rng, timeout):
    """n requests with Poisson arrivals at `rate` per second (open loop)."""
    gaps = [rng.expovariate(rate) for _ in range(n)]
    reqs = [wl.request(rng, i) for i in range(n)]
    rows = [None] * n
    threads = []

    def fire(i):
        picks, q = reqs[i]
        rows[i] = one_row(target.stream_chat(wl.body(model, mode, salt, picks, q), timeout))
        rows[i]["lateness_s"] = lateness[i]

    lateness = [0.0] * n
    t0 = time.perf_counter()
    at = 0.0
    for i in range(n):
        at += gaps[i]
        delay = t0 + at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        lateness[i] = max(0.0, -delay)
        th = threading.Thread(target=fire, args=(i,), daemon=True)
        th.start()
        threads.append(th)
    send_span = time.perf_counter() - t0
    for th in threads:
        th.join()
    wall = time.perf_counter() - t0
    ok = [r for r in rows if r["error"] is None and r["ttft_s"] is not None]
    # A failed request (429, error) misses any SLO: it counts as an infinite TTFT.
    ttft = [r["ttft_s"] if (r["error"] is None and r["ttft_s"] is not None) else math.inf for r in rows]
    overhead_ms = [1000.0 * (r["ttft_s"] - r["server_ttft_s"]) for r in ok if r["server_ttft_s"] is not None]
    hits = sum(r["segments_hit"] or 0 for r in ok)
    misses = sum(r["segments_missed"] or 0 for r in ok)
    prompt = sum(r["prompt_tokens"] or 0 for r in ok)
    cached = sum(r["cached_tokens"] or 0 for r in ok)
    errors = {}
    for r in rows:
        if r["error"] is not None:
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    wrong_mode = sum(1 for r in ok if r["mode"] != mode)
    return {
        "rate": rate, "requests": n, "ok": len(ok), "rejected_429": sum(1 for r in rows if r["status"] == 429),
        "errors": errors, "offered_rate": round(n / send_span, 3) if send_span > 0 else None,
        "wall_s": round(wall, 3),
        "ttft_s": summary(ttft), "server_ttft_s": summary([r["server_ttft_s"] for r in ok]),
        "e2e_s": summary([r["e2e_s"] for r in ok]),
        "first_event_ms": summary([1000 * r["ttfb_s"] for r in ok if r["ttfb_s"] is not None], 3),
        "http_overhead_ms": summary(overhead_ms, 3),
        "max_send_lateness_s": round(max(lateness), 4) if lateness else None,
        "segments_hit_ratio": round(hits / (hits + misses), 4) if hits + misses else None,
        "cached_token_ratio": round(cached / prompt, 4) if prompt else None,
        "mean_prompt_tokens": round(prompt / len(ok), 1) if ok else None,
        "wrong_mode": wrong_mode,
    }


def idle_overhead(target, wl, model, mode, salt, reps, timeout):
    """The same warm request `reps` times, one at a time: client vs server TTFT."""
    picks = list(range(min(wl.args.per_request, len(wl.docs))))
    q = QUESTIONS[0]
    rows = [one_row(target.stream_chat(wl.body(model, mode, salt, picks, q), timeout)) for _ in range(reps + 1)]
    rows = [r for r in rows[1:] if r["error"] is None and r["ttft_s"] is not None]  # first: warms it
    return {"requests": len(rows), "docs": picks, "question": q,
            "prompt_tokens": rows[0]["prompt_tokens"] if rows else None,
            "client_ttft_ms": summary([1000 * r["ttft_s"] for r in rows], 3),
            "server_ttft_ms": summary([1000 * r["server_ttft_s"] for r in rows if r["server_ttft_s"] is not None], 3),
            "first_event_ms": summary([1000 * r["ttfb_s"] for r in rows if r["ttfb_s"] is not None], 3),
            "http_overhead_ms": summary([1000 * (r["ttft_s"] - r["server_ttft_s"]) for r in rows
                                         if r["server_ttft_s"] is not None], 3)}


def inproc_ttft(args, wl, mode, reps, tmp):
    """`hypic run --segment ... --repeat`: the same request in one process, no HTTP."""
    picks = list(range(min(args.per_request, len(wl.docs))))
    files = []
    for i in picks:
        p = os.path.join(tmp, "doc%d.txt" % i)
        with open(p, "w") as f:
            f.write(wl.docs[i])
        files.append(p)
    cmd = [args.hypic_bin, "run", "--model", args.model, "--dtype", args.dtype, "--system", args.system,
           "--query", QUESTIONS[0], "--mode", mode, "--repeat", str(reps + 1),
           "--max-tokens", str(args.max_tokens), "--temperature", "0", "--json"]
    if args.seam is not None:
        cmd += ["--seam", str(args.seam)]
    for p in files:
        cmd += ["--segment", p]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    if out.returncode != 0:
        return {"error": out.stderr.strip()[-500:]}
    runs = []
    for line in out.stdout.splitlines():
        try:
            runs.append(json.loads(line))
        except ValueError:
            pass
    warm = runs[1:]
    return {"command": " ".join(cmd[:2]) + " ... --repeat %d" % (reps + 1),
            "cold_ttft_ms": round(runs[0]["ttft_ms"], 3) if runs else None,
            "warm_ttft_ms": summary([r["ttft_ms"] for r in warm], 3),
            "prompt_tokens": runs[0].get("prompt_tokens") if runs else None,
            "warm_segments_hit": warm[0].get("segments_hit") if warm else None}


def calibrate(target, model, timeout):
    """Tokens per word of the generated text, from the server's own count."""
    sample = make_doc(random.Random(12345), 200, 0)
    st, j = target.post_json("/v1/completions", {"model": model, "prompt": sample, "max_tokens": 1, "temperature": 0},
                             timeout=timeout)
    if st != 200:
        raise SystemExit("calibration request failed: %s %s" % (st, j))
    return j["usage"]["prompt_tokens"] / float(len(sample.split()))


def ensure_docs(args, target, model, docs_box):
    if docs_box.get("docs") is not None:
        return
    tpw = calibrate(target, model, args.timeout)
    n_words = max(8, int(round(args.doc_tokens / tpw)))
    drng = random.Random(args.seed)
    docs_box["docs"] = [make_doc(drng, n_words, i) for i in range(args.docs)]
    docs_box["info"] = {"count": args.docs, "target_tokens": args.doc_tokens,
                        "tokens_per_word": round(tpw, 3), "words_per_doc": n_words}
    log("documents: %d x ~%d tokens (%.2f tokens/word, %d words)" % (args.docs, args.doc_tokens, tpw, n_words))


def session(args, ctx, mode, rates, docs_box, with_idle, tag):
    """One server lifetime (or, with --url, one fresh cache_salt): warm-up, optionally the
    idle overhead, then `rates` in order. Returns (dict, rows of the rates run)."""
    server = None
    url = args.url
    if not url:
        server = Server(args, ctx["log_dir"], tag).start()
        url = server.url
    try:
        target = Target(url, args.api_key)
        model = args.served_model
        if not model:
            st, j = target.get_json("/v1/models")
            if st != 200:
                raise SystemExit("GET /v1/models: %s %s" % (st, j))
            model = j["data"][0]["id"]
        ctx["model"] = model
        ensure_docs(args, target, model, docs_box)
        wl = Workload(args, docs_box["docs"])
        salt = "serve-bench-%s-%s" % (mode, uuid.uuid4().hex[:12])
        # The same request stream for every mode (and, with --restart rate, every rate).
        rng = random.Random(args.seed + 1)
        out = {"cache_salt": salt}
        t0 = time.perf_counter()
        wrows = []
        for i in range(args.warmup):
            picks, q = wl.request(rng, -1 - i)
            wrows.append(one_row(target.stream_chat(wl.body(model, mode, salt, picks, q), args.timeout)))
        bad = [r for r in wrows if r["error"]]
        out["warmup"] = {"requests": args.warmup, "failed": len(bad), "s": round(time.perf_counter() - t0, 3),
                         "ttft_s": summary([r["ttft_s"] for r in wrows if r["ttft_s"] is not None]),
                         "segments_hit_ratio_last_half": hit_ratio(wrows[len(wrows) // 2:])}
        if bad:
            log("warm-up: %d failed, e.g. %s" % (len(bad), bad[0]))
        log("%s: warm-up %d requests in %.1f s" % (mode, args.warmup, out["warmup"]["s"]))
        if with_idle and args.overhead_reps > 0:
            out["idle"] = idle_overhead(target, wl, model, mode, salt, args.overhead_reps, args.timeout)
            log("%s: idle client TTFT p50 %s ms, server %s ms" % (
                mode, (out["idle"]["client_ttft_ms"] or {}).get("p50"), (out["idle"]["server_ttft_ms"] or {}).get("p50")))
        rows, gave_up = [], False
        for rate in rates:
            row = run_rate(target, wl, model, mode, salt, rate, args.requests, rng, args.timeout)
            row["slo_met"] = row["ttft_s"] is not None and row["ttft_s"]["p90"] is not None and row["ttft_s"]["p90"] <= args.slo
            rows.append(row)
            t = row["ttft_s"] or {}
            log("%s @ %g/s: TTFT p50 %s p90 %s p99 %s s, ok %d/%d, 429 %d, hit ratio %s, overhead p50 %s ms" % (
                mode, rate, t.get("p50"), t.get("p90"), t.get("p99"), row["ok"], row["requests"], row["rejected_429"],
                row["segments_hit_ratio"], (row["http_overhead_ms"] or {}).get("p50")))
            p90 = t.get("p90")
            if args.give_up > 0 and (p90 is None or p90 > args.give_up * args.slo):
                gave_up = True
                break
        out["gave_up"] = gave_up
        return out, rows
    finally:
        if server:
            server.stop()


def hit_ratio(rows):
    h = sum(r["segments_hit"] or 0 for r in rows if r["error"] is None)
    m = sum(r["segments_missed"] or 0 for r in rows if r["error"] is None)
    return round(h / (h + m), 4) if h + m else None


def run_mode(args, ctx, mode, docs_box):
    out = {"rates": []}
    if args.restart == "mode":
        sess, rows = session(args, ctx, mode, args.rates, docs_box, True, mode)
        out.update(sess)
        out["rates"] = rows
        gave_up = sess["gave_up"]
    else:
        out["sessions"] = []
        gave_up = False
        for k, rate in enumerate(args.rates):
            sess, rows = session(args, ctx, mode, [rate], docs_box, k == 0, "%s-%g" % (mode, rate))
            if k == 0 and "idle" in sess:
                out["idle"] = sess.pop("idle")
            out["sessions"].append(sess)
            out["rates"].extend(rows)
            if sess.pop("gave_up"):
                gave_up = True
                break
    done = [r["rate"] for r in out["rates"]]
    rest = [r for r in args.rates if r not in done]
    if gave_up and rest:
        log("%s: p90 beyond %g x SLO; skipped the higher rates %s" % (mode, args.give_up, rest))
        out["skipped_rates"] = rest
    out.pop("gave_up", None)
    # Sustainable: the highest rate such that it and every lower measured rate met the SLO (a
    # lucky pass above a failed rate does not count).
    best = None
    for r in sorted(out["rates"], key=lambda r: r["rate"]):
        if not r["slo_met"]:
            break
        best = r["rate"]
    out["max_rate_under_slo"] = best
    out["highest_rate_tried"] = max((r["rate"] for r in out["rates"]), default=None)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n", 1)[1])
    src = ap.add_argument_group("server")
    src.add_argument("--url", help="a running server (http://HOST:PORT); else --model and --hypic-bin start one")
    src.add_argument("--model", help="model directory (starts a fresh server per mode)")
    src.add_argument("--hypic-bin", help="the hypic binary")
    src.add_argument("--dtype", default="bf16", help="--dtype of the started server (default bf16)")
    src.add_argument("--max-concurrency", type=int, default=1, help="server workers (default 1)")
    src.add_argument("--max-queue", type=int, default=256, help="server queue (default 256)")
    src.add_argument("--cache-mem", type=int, default=4096, help="server cache MiB (default 4096)")
    src.add_argument("--server-arg", action="append", help="extra argument for hypic serve (repeatable)")
    src.add_argument("--api-key", default=os.environ.get("HYPIC_API_KEY"), help="API key (also $HYPIC_API_KEY)")
    src.add_argument("--served-model", help="model id to send (default: from /v1/models)")
    src.add_argument("--keep-logs", help="directory for the started servers' logs (default: a temp dir, removed)")
    w = ap.add_argument_group("workload")
    w.add_argument("--docs", type=int, default=20, help="documents in the pool (default 20)")
    w.add_argument("--doc-tokens", type=int, default=1024, help="tokens per document, approx. (default 1024)")
    w.add_argument("--per-request", type=int, default=4, help="documents per request (default 4)")
    w.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent of document popularity (default 1.0)")
    w.add_argument("--max-tokens", type=int, default=8, help="max_tokens per request (default 8)")
    w.add_argument("--seam", type=int, default=None, help="hypic.seam (default: the server's)")
    w.add_argument("--system", default="Answer the question using the documents.", help="system prompt")
    w.add_argument("--seed", type=int, default=0)
    m = ap.add_argument_group("measurement")
    m.add_argument("--restart", choices=("mode", "rate"), default="mode",
                   help="a fresh server (or, with --url, cache_salt) per mode, caches carrying across its "
                        "rates (default), or per rate, each rate after its own warm-up from empty caches")
    m.add_argument("--modes", default="prefix,hypic", help="comma list of full,prefix,hypic,naive (default prefix,hypic)")
    m.add_argument("--rates", default="0.5,1,2,4,8", help="arrival rates, requests/s (default 0.5,1,2,4,8)")
    m.add_argument("--requests", type=int, default=100, help="measured requests per rate (default 100)")
    m.add_argument("--warmup", type=int, default=None, help="sequential warm-up requests per mode (default: --docs)")
    m.add_argument("--slo", type=float, default=1.0, help="p90 TTFT objective, seconds (default 1.0)")
    m.add_argument("--give-up", type=float, default=4.0,
                   help="skip a mode's higher rates once p90 > this x SLO (0: never; default 4)")
    m.add_argument("--overhead-reps", type=int, default=10, help="idle warm requests for the HTTP overhead (default 10)")
    m.add_argument("--inproc-reps", type=int, default=10,
                   help="warm repeats of `hypic run` for the in-process TTFT (0: skip; needs --hypic-bin, --model)")
    m.add_argument("--timeout", type=float, default=300, help="per-request timeout, s (default 300)")
    args = ap.parse_args()
    args.modes = [s.strip() for s in args.modes.split(",") if s.strip()]
    args.rates = sorted(float(s) for s in args.rates.split(",") if s.strip())
    if args.warmup is None:
        args.warmup = args.docs
    for mo in args.modes:
        if mo not in ("full", "prefix", "hypic", "naive"):
            ap.error("unknown mode %r" % mo)
    if not args.rates or min(args.rates) <= 0:
        ap.error("--rates must be positive")
    if not args.url and not (args.model and args.hypic_bin):
        ap.error("give --url, or --model and --hypic-bin")
    # Loopback never through a proxy (http.client does not use one; subprocesses might).
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")

    tmp = tempfile.mkdtemp(prefix="serve-bench-")
    log_dir = args.keep_logs or tmp
    os.makedirs(log_dir, exist_ok=True)
    result = {"config": {k: v for k, v in vars(args).items() if k != "api_key"},
              "server": {"restart": ("fresh server per mode: the warm-up, then the rates in increasing order, "
                                     "caches carrying from rate to rate" if args.restart == "mode" else
                                     "fresh server per (mode, rate), each after its own warm-up")
                         if not args.url else "existing server at %s; a fresh cache_salt per %s" % (args.url, args.restart)},
              "ttft_definition": "client: request send -> first streamed chunk with text or finish_reason; "
                                 "server: usage.hypic.ttft_ms (handler arrival -> first token, queueing included)",
              "modes": {}}
    docs_box = {}
    ctx = {"log_dir": log_dir}
    try:
        for mode in args.modes:
            result["modes"][mode] = run_mode(args, ctx, mode, docs_box)
            result["model"] = ctx.get("model")
            # After the server is gone (a second copy of a big model may not fit beside it).
            if args.inproc_reps > 0 and args.hypic_bin and args.model and docs_box.get("docs"):
                ip = inproc_ttft(args, Workload(args, docs_box["docs"]), mode, args.inproc_reps, tmp)
                result["modes"][mode]["inproc"] = ip
                log("%s: in-process warm TTFT %s" % (mode, ip.get("warm_ttft_ms")))
    finally:
        result["documents"] = docs_box.get("info")
        if not args.keep_logs:
            for f in os.listdir(tmp):
                os.unlink(os.path.join(tmp, f))
            os.rmdir(tmp)
    result["max_rate_under_slo"] = {mo: r.get("max_rate_under_slo") for mo, r in result["modes"].items()}
    # The same warm request, one at a time: through HTTP (client clock), as the server timed
    # it, and in one process without HTTP (hypic run --repeat).
    p50 = lambda d: (d or {}).get("p50")
    result["http_overhead"] = {
        mo: {"client_ttft_ms_p50": p50(r.get("idle", {}).get("client_ttft_ms")),
             "server_ttft_ms_p50": p50(r.get("idle", {}).get("server_ttft_ms")),
             "client_minus_server_ms_p50": p50(r.get("idle", {}).get("http_overhead_ms")),
             "inproc_warm_ttft_ms_p50": p50(r.get("inproc", {}).get("warm_ttft_ms"))}
        for mo, r in result["modes"].items()}
    p, h = result["max_rate_under_slo"].get("prefix"), result["max_rate_under_slo"].get("hypic")
    result["ratio_hypic_over_prefix"] = round(h / p, 3) if p and h else None
    if h is not None and h == result["modes"]["hypic"].get("highest_rate_tried"):
        result["ratio_note"] = "hypic met the SLO at every tested rate: its limit, and so the ratio, is a lower bound"
    if p is None or h is None:
        result["ratio_note"] = ("a mode met the SLO at no tested rate (or was not run): lower the rates, "
                                "or raise --slo")
    json.dump(result, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
