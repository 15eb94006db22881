#!/usr/bin/env python3
"""An agent trace: TTFT and reused tokens with prefix caching against hypic's tool segments.

A pool of --tools tool definitions (about 150 tokens each when rendered); every request carries
a random subset of --min-tools to --max-tools of them in random order, a system prompt and a
short conversation (a user turn, an assistant turn, a new user turn), as an agent framework
sends them. Each tool description is its own segment (`"hypic": {"auto_segments": ["tools"]}`):
in `prefix` mode an entry is reused only behind the same tools in the same order (what prefix
caching can do), in `hypic` mode every tool seen before is reused wherever it appears. Each mode
runs on a fresh server over the same trace: --warmup requests, then --requests measured ones.
Greedy, one output token; TTFT is the server's (usage.hypic.ttft_ms).

One JSON document on stdout (progress on stderr): per mode TTFT mean / p50 / p90, reused and
recomputed tokens, segment hits, and the ratios prefix / hypic; the CPU. Standard library only:
  python3 bench/agent_trace.py --model /work/bench-models/q35-4l --hypic-bin build/hypic
"""
import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from restart_ttft import WORDS, Server, call, cpu  # noqa: E402


def log(msg):
    sys.stderr.write("[agent_trace] %s\n" % msg)
    sys.stderr.flush()


def sentence(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def make_tools(rng, n):
    tools = []
    for i in range(n):
        props = {}
        for k in range(3):
            name = "%s_%d" % (rng.choice(WORDS), k)
            props[name] = {"type": rng.choice(["string", "integer", "boolean"]), "description": sentence(rng, 8)}
        tools.append({"type": "function", "function": {
            "name": "tool_%02d_%s" % (i, rng.choice(WORDS)),
            "description": " ".join(sentence(rng, 10) for _ in range(4)),
            "parameters": {"type": "object", "properties": props, "required": sorted(props)[:2]}}})
    return tools


def make_trace(rng, tools, n, lo, hi):
    trace = []
    for _ in range(n):
        subset = rng.sample(tools, rng.randint(lo, hi))  # random subset, random order
        msgs = [{"role": "system", "content": "You are an agent. Use the tools when they help."},
                {"role": "user", "content": sentence(rng, 20)},
                {"role": "assistant", "content": sentence(rng, 15)},
                {"role": "user", "content": sentence(rng, 20)}]
        trace.append((subset, msgs))
    return trace


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def run_mode(args, mode, trace, log_dir):
    s = Server(args, log_dir, mode, []).start()
    rows = []
    try:
        for i, (tools, msgs) in enumerate(trace):
            body = {"model": s.model, "messages": msgs, "tools": tools, "temperature": 0, "max_tokens": 1,
                    "hypic": {"mode": mode, "auto_segments": ["tools"]}}
            st, raw = call(s.port, "POST", "/v1/chat/completions", body)
            if st != 200:
                raise SystemExit("request failed (%d): %s" % (st, raw[:500]))
            u = json.loads(raw)["usage"]
            h = u["hypic"]
            if i >= args.warmup:
                rows.append({"ttft_ms": h["ttft_ms"], "prompt_tokens": u["prompt_tokens"], "tools": len(tools),
                             "reused_tokens": h["reused_tokens"], "recomputed_tokens": h["recomputed_tokens"],
                             "segments_hit": h["segments_hit"], "segments_missed": h["segments_missed"]})
            log("%s %d/%d ttft %.0f ms, reused %d of %d" % (mode, i + 1, len(trace), h["ttft_ms"], h["reused_tokens"],
                                                           u["prompt_tokens"]))
    finally:
        s.stop()
    ttft = [r["ttft_ms"] for r in rows]
    return {"requests": len(rows),
            "ttft_ms": {"mean": statistics.mean(ttft), "p50": pct(ttft, 50), "p90": pct(ttft, 90)},
            "prompt_tokens_mean": statistics.mean(r["prompt_tokens"] for r in rows),
            "reused_tokens_mean": statistics.mean(r["reused_tokens"] for r in rows),
            "recomputed_tokens_mean": statistics.mean(r["recomputed_tokens"] for r in rows),
            "segment_hit_rate": sum(r["segments_hit"] for r in rows) /
                                max(1, sum(r["segments_hit"] + r["segments_missed"] for r in rows)),
            "rows": rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--hypic-bin", required=True)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--tools", type=int, default=30)
    ap.add_argument("--min-tools", type=int, default=8)
    ap.add_argument("--max-tools", type=int, default=15)
    ap.add_argument("--requests", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--modes", default="prefix,hypic")
    ap.add_argument("--cache-mem", type=int, default=8192, help="MiB")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    tools = make_tools(rng, args.tools)
    trace = make_trace(rng, tools, args.warmup + args.requests, args.min_tools, args.max_tools)
    out = {"bench": "agent_trace", "model": args.model, "dtype": args.dtype, "cpu": cpu(),
           "tools": args.tools, "tools_per_request": [args.min_tools, args.max_tools],
           "warmup": args.warmup, "requests": args.requests, "seed": args.seed, "modes": {}}
    with tempfile.TemporaryDirectory(prefix="hypic-agent-") as d:
        for mode in args.modes.split(","):
            t0 = time.monotonic()
            out["modes"][mode] = run_mode(args, mode, trace, d)
            log("%s done in %.0f s" % (mode, time.monotonic() - t0))
    m = out["modes"]
    if "prefix" in m and "hypic" in m:
        out["ttft_ratio_prefix_over_hypic"] = {k: m["prefix"]["ttft_ms"][k] / m["hypic"]["ttft_ms"][k]
                                               for k in ("mean", "p50", "p90")}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
