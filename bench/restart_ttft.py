#!/usr/bin/env python3
"""First-request TTFT after a warm restart against after a cold start (`hypic serve --cache-dir`).

Per repeat, in a fresh cache directory: start `hypic serve --cache-dir D`, send a RAG request
(--docs documents of about --doc-tokens tokens as segments, then a question; greedy, one
token) — the cold start's first request —, send it again (warm, in memory), stop the server
with SIGTERM (it flushes its memory tier to D: the `cache.flush` log line gives entries, bytes
and ms), start it again on D and send the same request: the warm restart's first request,
whose segments come from the disk tier. TTFT is the server's (usage.hypic.ttft_ms, arrival to
first token) and the client's (request sent to answer received, one token). Also recorded:
the start time to /health and the shutdown time (SIGTERM to exit, drain and flush included).

One JSON document on stdout (progress on stderr): per repeat and medians, the ratio cold /
warm restart, the CPU. Standard library only. Example:
  python3 bench/restart_ttft.py --model /work/bench-models/q35-4l --hypic-bin build/hypic
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

_PORT_RE = re.compile(r"hypic serve: model '([^']*)' on http://([0-9.]+):(\d+)")
WORDS = ("river valley mountain harbour market engine signal archive library village forest winter "
         "summer council treaty merchant railway bridge tunnel canal factory harvest copper silver "
         "sailor pilot surveyor astronomer chemist ledger census storm drought flood meadow orchard").split()


def log(msg):
    sys.stderr.write("[restart_ttft] %s\n" % msg)
    sys.stderr.flush()


def cpu():
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
        info["model"] = re.search(r"model name\s*:\s*(.*)", text).group(1)
        flags = set(re.search(r"flags\s*:\s*(.*)", text).group(1).split())
        info["features"] = sorted(flags & {"avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8"})
    except (OSError, AttributeError):
        pass
    return info


def call(port, method, path, body=None, timeout=3600):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


class Server:
    """`hypic serve` on a free port with `extra` flags; its stderr goes to log_dir/serve-TAG.log."""

    def __init__(self, args, log_dir, tag, extra):
        self.cmd = [args.hypic_bin, "serve", "--model", args.model, "--port", "0", "--dtype", args.dtype,
                    "--cache-mem", str(args.cache_mem)] + extra
        self.log_path = os.path.join(log_dir, "serve-%s.log" % tag)

    def start(self):
        t0 = time.monotonic()
        self.logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.logf)
        while True:
            m = _PORT_RE.search(self.log())
            if m:
                self.model, self.port = m.group(1), int(m.group(3))
                break
            if self.proc.poll() is not None:
                raise SystemExit("hypic serve exited before listening:\n" + self.log())
            time.sleep(0.05)
        while True:
            try:
                if call(self.port, "GET", "/health", timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        self.start_s = time.monotonic() - t0
        return self

    def log(self):
        with open(self.log_path, "r", errors="replace") as f:
            return f.read()

    def stop(self):
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=600)
        self.logf.close()
        lines = [json.loads(l) for l in self.log().splitlines() if l.startswith("{")]
        flush = [l for l in lines if l.get("event") == "cache.flush"]
        return time.monotonic() - t0, (flush[0] if flush else None)


def ask(s, docs, question):
    parts = [{"type": "text", "text": d, "cache_control": {"type": "segment"}} for d in docs]
    parts.append({"type": "text", "text": question})
    body = {"model": s.model, "messages": [{"role": "system", "content": "Answer from the documents."},
                                           {"role": "user", "content": parts}],
            "temperature": 0, "max_tokens": 1}
    t0 = time.monotonic()
    st, raw = call(s.port, "POST", "/v1/chat/completions", body)
    client_ms = (time.monotonic() - t0) * 1000
    if st != 200:
        raise SystemExit("request failed (%d): %s" % (st, raw[:500]))
    u = json.loads(raw)["usage"]
    h = u["hypic"]
    return {"server_ttft_ms": h["ttft_ms"], "client_ms": client_ms, "hit": h["segments_hit"],
            "missed": h["segments_missed"], "prompt_tokens": u["prompt_tokens"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--hypic-bin", required=True)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--docs", type=int, default=4)
    ap.add_argument("--doc-words", type=int, default=700, help="words per document (about 1000 tokens)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cache-mem", type=int, default=4096, help="MiB")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    runs = []
    for rep in range(args.repeats):
        docs = ["Document %d.%d: " % (rep, i) + " ".join(rng.choice(WORDS) for _ in range(args.doc_words))
                for i in range(args.docs)]
        q = "Which of the documents mentions a harbour first?"
        root = tempfile.mkdtemp(prefix="hypic-restart-")
        cache = os.path.join(root, "cache")
        try:
            a = Server(args, root, "a", ["--cache-dir", cache]).start()
            cold = ask(a, docs, q)
            warm = ask(a, docs, q)
            stop_s, flush = a.stop()
            b = Server(args, root, "b", ["--cache-dir", cache]).start()
            restart = ask(b, docs, q)
            b.stop()
        finally:
            shutil.rmtree(root, True)
        run = {"cold_start": cold, "warm_in_memory": warm, "warm_restart": restart, "start_s": a.start_s,
               "restart_start_s": b.start_s, "shutdown_s": stop_s, "flush": flush}
        log("repeat %d: cold %.0f ms, warm restart %.0f ms (hit %d/%d), in memory %.0f ms; flush %s"
            % (rep, cold["server_ttft_ms"], restart["server_ttft_ms"], restart["hit"], args.docs,
               warm["server_ttft_ms"], flush))
        runs.append(run)
    med = lambda k, f: statistics.median(r[k][f] for r in runs)  # noqa: E731
    out = {"bench": "restart_ttft", "model": args.model, "dtype": args.dtype, "docs": args.docs,
           "prompt_tokens": runs[0]["cold_start"]["prompt_tokens"], "cpu": cpu(), "runs": runs,
           "median": {k: {"server_ttft_ms": med(k, "server_ttft_ms"), "client_ms": med(k, "client_ms")}
                      for k in ("cold_start", "warm_in_memory", "warm_restart")}}
    out["cold_over_warm_restart"] = out["median"]["cold_start"]["server_ttft_ms"] / out["median"]["warm_restart"]["server_ttft_ms"]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
