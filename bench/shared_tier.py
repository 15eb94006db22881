#!/usr/bin/env python3
"""The shared segment tier (`hypic serve --segment-store redis://…`) measured on two instances.

Part 1, per segment of about --doc-words words (≈1000 tokens): instance A builds it (a
one-document RAG request, greedy, one token), B then gets it from Redis, then from its own
memory. TTFT is the server's (usage.hypic.ttft_ms); the build and fetch costs are the TTFTs
minus the memory hit's (the rest of the request is the same); B's debug log also gives the
fetch's own time inside the store (GETs, checksums, parsing). Bytes per entry come from A's
hypic_segment_store_written_bytes_total.

Part 2, a RAG trace spread over the two instances (requests alternate A, B; each uses
--per-request of --trace-docs documents in random order): hit rate (segments hit / segments
used) and p50 / p90 TTFT, with the shared tier and without it (each instance builds what it
has not seen itself).

redis-server (Debian's) is started here on a free loopback port. One JSON document on stdout
(progress on stderr). Standard library only. Example:
  python3 bench/shared_tier.py --model /work/bench-models/q35-4l --hypic-bin build/hypic
"""
import argparse
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from restart_ttft import WORDS, Server, ask, call, cpu  # noqa: E402


def log(msg):
    sys.stderr.write("[shared_tier] %s\n" % msg)
    sys.stderr.flush()


def start_redis(root):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                          "--dir", root], stdout=subprocess.DEVNULL)
    for _ in range(600):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as c:
                c.sendall(b"PING\r\n")
                if c.recv(16).startswith(b"+PONG"):
                    return p, "redis://127.0.0.1:%d" % port
        except OSError:
            time.sleep(0.1)
    raise SystemExit("redis-server did not start (scripts/install.sh installs it)")


def metric(s, name):
    st, body = call(s.port, "GET", "/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def wait_puts(s, n):
    """Waits for A's asynchronous write-backs (n entries written in all)."""
    for _ in range(12000):
        if metric(s, "hypic_segment_store_puts_total") >= n:
            return
        time.sleep(0.01)
    raise SystemExit("the shared tier write-back did not happen")


def make_docs(rng, n, words, tag):
    return ["Document %s.%d: " % (tag, i) + " ".join(rng.choice(WORDS) for _ in range(words)) for i in range(n)]


def fetch_times(server):
    """The ms of each shared-tier fetch, in order, from the server's debug log."""
    return [float(m.group(1)) for m in re.finditer(r"shared tier: fetched \S+ in ([0-9.]+) ms", server.log())]


def per_segment(args, root, url, rng):
    os.environ["HYPIC_LOG"] = "debug"  # B logs each fetch's time
    a = Server(args, root, "p1a", ["--segment-store", url]).start()
    b = Server(args, root, "p1b", ["--segment-store", url]).start()
    del os.environ["HYPIC_LOG"]
    rows = []
    try:
        for i, d in enumerate(make_docs(rng, args.segments, args.doc_words, "p1")):
            q = "What does document %d say?" % i
            bytes0 = metric(a, "hypic_segment_store_written_bytes_total")
            build = ask(a, [d], q)
            wait_puts(a, i + 1)
            remote = ask(b, [d], q)
            mem = ask(b, [d], q)
            assert (build["missed"], remote["hit"], mem["hit"]) == (1, 1, 1), (build, remote, mem)
            row = {"prompt_tokens": build["prompt_tokens"],
                   "entry_bytes": metric(a, "hypic_segment_store_written_bytes_total") - bytes0,
                   "ttft_build_ms": build["server_ttft_ms"], "ttft_redis_ms": remote["server_ttft_ms"],
                   "ttft_memory_ms": mem["server_ttft_ms"]}
            row["build_ms"] = row["ttft_build_ms"] - row["ttft_memory_ms"]
            row["fetch_ms"] = row["ttft_redis_ms"] - row["ttft_memory_ms"]
            row["fetch_logged_ms"] = fetch_times(b)[-1]  # inside the store: GETs, checks, parse
            log("segment %d: build %.0f ms, Redis fetch %.1f ms (%.1f in the store), %.1f MB"
                % (i, row["build_ms"], row["fetch_ms"], row["fetch_logged_ms"], row["entry_bytes"] / 1e6))
            rows.append(row)
    finally:
        a.stop()
        b.stop()
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    med["build_over_fetch"] = med["build_ms"] / max(med["fetch_ms"], 1e-3)
    med["fetch_gb_per_s"] = med["entry_bytes"] / 1e9 / max(med["fetch_ms"] / 1000, 1e-6)
    return {"runs": rows, "median": med}


def trace(args, root, url, rng_seed, tag):
    rng = random.Random(rng_seed)
    docs = make_docs(rng, args.trace_docs, args.doc_words, "t")
    extra = ["--segment-store", url] if url else []
    servers = [Server(args, root, "%sa" % tag, extra).start(), Server(args, root, "%sb" % tag, extra).start()]
    rows = []
    try:
        for i in range(args.requests):
            pick = rng.sample(docs, args.per_request)
            s = servers[i % 2]
            puts = metric(s, "hypic_segment_store_puts_total") if url else 0
            r = ask(s, pick, "Question %d: which document mentions a harbour?" % i)
            rows.append(r)
            if url:  # the write-backs land before the other instance asks (as a gap between requests would allow)
                wait_puts(s, puts + r["missed"])
            log("%s request %d on %s: %d hit, %d built, TTFT %.0f ms" % (tag, i, "AB"[i % 2], r["hit"], r["missed"],
                                                                       r["server_ttft_ms"]))
    finally:
        for s in servers:
            s.stop()
    ttft = sorted(r["server_ttft_ms"] for r in rows)
    used = sum(r["hit"] + r["missed"] for r in rows)
    return {"requests": len(rows), "segments_used": used, "segments_hit": sum(r["hit"] for r in rows),
            "hit_rate": sum(r["hit"] for r in rows) / used, "p50_ttft_ms": statistics.median(ttft),
            "p90_ttft_ms": ttft[int(0.9 * (len(ttft) - 1))], "mean_ttft_ms": statistics.mean(ttft)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--hypic-bin", required=True)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--doc-words", type=int, default=700, help="words per document (about 1000 tokens)")
    ap.add_argument("--segments", type=int, default=8, help="part 1: segments measured")
    ap.add_argument("--trace-docs", type=int, default=10)
    ap.add_argument("--per-request", type=int, default=3)
    ap.add_argument("--requests", type=int, default=30)
    ap.add_argument("--cache-mem", type=int, default=4096, help="MiB")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="hypic-shared-")
    redis, url = start_redis(root)
    try:
        part1 = per_segment(args, root, url, random.Random(args.seed))
        with_tier = trace(args, root, url, args.seed + 1, "shared")
        without = trace(args, root, None, args.seed + 1, "local")
    finally:
        redis.kill()
        redis.wait()
        shutil.rmtree(root, True)
    out = {"bench": "shared_tier", "model": args.model, "dtype": args.dtype, "cpu": cpu(),
           "per_segment": part1, "trace": {"with_shared_tier": with_tier, "without": without,
                                           "p50_ttft_ratio": without["p50_ttft_ms"] / with_tier["p50_ttft_ms"]}}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
