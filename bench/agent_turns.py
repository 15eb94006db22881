#!/usr/bin/env python3
"""Multi-turn agent sessions: per-turn TTFT and recomputed tokens, hypic against llama-server.

An agent session in the Qwen3.5 chat template with reasoning on: a system turn with --tools tool
descriptions, then --turns turns; a turn is a user message, a request whose reply thinks and
calls a tool, the tool's result, and a request whose reply thinks and answers. The template
keeps an assistant message's reasoning only after the last user message, so each new user
message drops the reasoning of the turn before: the prompt stops being an extension of the last
one (the case llama.cpp users of hybrid models report as "every turn re-processes the prompt").
--sessions sessions run interleaved (turn t of every session, then turn t + 1).

The history is synthetic and the same for every engine (reasoning, calls, results and answers
drawn from a seeded word list; a random-weight bench model's own replies would differ between
engines and mean nothing); each request still decodes --max-tokens tokens. Engines, one after
the other on the same trace:
  hypic-prefix   `hypic serve --reasoning on`, mode prefix (each message a checkpoint)
  hypic-hypic    mode hypic with the tool descriptions as segments (auto_segments tools)
  llama-server   llama.cpp's server on the same weights as GGUF (--gguf), the real Qwen3.5 Jinja
                 template (--chat-template), prompt caching (cache_prompt, --cache-ram) and
                 context checkpoints (--ctx-checkpoints), one slot per session (--llama-slots 1:
                 one slot for all, the server's default; --only-llama runs it alone)
Per request: the server's prefill time (hypic usage.hypic.ttft_ms; llama-server timings.prompt_ms)
and the tokens it ran through the model (usage.hypic.recomputed_tokens; timings.prompt_n), and
the tokens the turn added (prompt minus the previous request's prompt and reply, at least 0).

--check (for tests, f32): the prefix and full modes of hypic on the trace give the same greedy
replies on every request. One JSON document on stdout, progress on stderr; standard library only:
  python3 bench/agent_turns.py --hypic-bin build/hypic --model /work/bench-models/q35-h1024-8l-tiny \\
      --gguf /work/bench-models/q35-h1024-8l-tiny-bf16.gguf --llama-server BUILD/bin/llama-server \\
      --chat-template llama.cpp/models/templates/Qwen3.5-4B.jinja
"""
import argparse
import http.client
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from restart_ttft import WORDS, Server, call, cpu  # noqa: E402


def log(msg):
    sys.stderr.write("[agent_turns] %s\n" % msg)
    sys.stderr.flush()


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def make_tools(rng, n):
    return [{"type": "function", "function": {
        "name": "tool_%02d_%s" % (i, rng.choice(WORDS)),
        "description": words(rng, 40).capitalize() + ".",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": words(rng, 8)},
            "limit": {"type": "integer", "description": words(rng, 6)}}, "required": ["query"]}}}
        for i in range(n)]


class Session:
    """One agent's conversation; next_request() gives the messages of its next request and
    record() appends what the agent does with the reply (the synthetic history)."""

    def __init__(self, rng, index, tools):
        self.rng, self.tools = rng, tools
        self.messages = [{"role": "system", "content": "You are agent %d. %s." % (index, words(rng, 30).capitalize())}]
        self.step = 0  # 0: a user message comes next; 1: a tool result comes next

    def next_request(self):
        r = self.rng
        if self.step == 0:
            self.messages.append({"role": "user", "content": words(r, r.randint(15, 30)).capitalize() + "?"})
        else:
            call = self.messages[-1]["tool_calls"][0]
            self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": words(r, r.randint(30, 60))})
        return list(self.messages)

    def record(self, turn):
        r = self.rng
        reasoning = words(r, r.randint(30, 60)).capitalize() + "."
        if self.step == 0:
            tool = r.choice(self.tools)["function"]["name"]
            call = {"id": "call_%d_%d" % (turn, len(self.messages)), "type": "function",
                    "function": {"name": tool, "arguments": json.dumps({"query": words(r, 4)})}}
            self.messages.append({"role": "assistant", "content": "", "reasoning_content": reasoning,
                                  "tool_calls": [call]})
        else:
            self.messages.append({"role": "assistant", "reasoning_content": reasoning,
                                  "content": words(r, r.randint(15, 30)).capitalize() + "."})
        self.step ^= 1


def trace(seed, n_sessions, n_turns, n_tools):
    """[(session, turn, messages)] in the interleaved order; tools."""
    rng = random.Random(seed)
    tools = make_tools(rng, n_tools)
    sessions = [Session(random.Random(seed * 1000 + i), i, tools) for i in range(n_sessions)]
    out = []
    for t in range(n_turns):
        for _ in range(2):  # the call, then the answer
            for i, s in enumerate(sessions):
                out.append((i, t, s.next_request()))
                s.record(t)
    return out, tools


def post(port, path, body):
    status, data = call(port, "POST", path, body)
    if status != 200:
        raise SystemExit("POST %s -> %d: %s" % (path, status, data[:400]))
    return json.loads(data)


def run_hypic(port, model, reqs, tools, mode, max_tokens, salt):
    rows = []
    for i, (s, t, msgs) in enumerate(reqs):
        body = {"model": model, "messages": msgs, "tools": tools, "max_tokens": max_tokens, "temperature": 0,
                "cache_salt": salt, "hypic": {"mode": mode, "auto_segments": ["tools"] if mode == "hypic" else False}}
        t0 = time.monotonic()
        r = post(port, "/v1/chat/completions", body)
        wall = (time.monotonic() - t0) * 1000
        h = r["usage"]["hypic"]
        m = r["choices"][0]["message"]
        rows.append({"session": s, "turn": t, "prompt_tokens": r["usage"]["prompt_tokens"],
                     "completion_tokens": r["usage"]["completion_tokens"], "recomputed": h["recomputed_tokens"],
                     "prefill_ms": h["ttft_ms"], "wall_ms": wall,
                     "reply": (m.get("reasoning_content") or "") + "\x00" + (m.get("content") or "")})
        if i % 10 == 0:
            log("%s: request %d/%d, prompt %d, recomputed %d, %.0f ms" % (mode, i + 1, len(reqs), rows[-1]["prompt_tokens"],
                                                                       rows[-1]["recomputed"], rows[-1]["prefill_ms"]))
    return rows


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_llama(a, reqs, tools, log_dir):
    port = free_port()
    slots = a.llama_slots or a.sessions
    cmd = [a.llama_server, "-m", a.gguf, "--port", str(port), "--host", "127.0.0.1", "-t", str(os.cpu_count() or 2),
           "-c", str(slots * a.ctx_per_slot), "-np", str(slots), "--jinja", "--chat-template-file", a.chat_template,
           "--ctx-checkpoints", str(a.ctx_checkpoints), "--cache-ram", str(a.cache_mem), "--reasoning-format", "deepseek",
           "--no-warmup"]
    log("llama-server: " + " ".join(cmd))
    logf = open(os.path.join(log_dir, "llama-server.log"), "wb")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT)
    try:
        for _ in range(6000):
            if proc.poll() is not None:
                raise SystemExit("llama-server exited: see " + logf.name)
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        rows = []
        for i, (s, t, msgs) in enumerate(reqs):
            body = {"messages": msgs, "tools": tools, "max_tokens": a.max_tokens, "temperature": 0, "cache_prompt": True}
            if slots == a.sessions:
                body["id_slot"] = s  # a slot per session
            t0 = time.monotonic()
            r = post(port, "/v1/chat/completions", body)
            wall = (time.monotonic() - t0) * 1000
            tm = r["timings"]
            rows.append({"session": s, "turn": t, "prompt_tokens": r["usage"]["prompt_tokens"],
                         "completion_tokens": r["usage"]["completion_tokens"], "recomputed": tm["prompt_n"],
                         "prefill_ms": tm["prompt_ms"], "wall_ms": wall})
            if i % 10 == 0:
                log("llama-server: request %d/%d, prompt %d, recomputed %d, %.0f ms" % (
                    i + 1, len(reqs), rows[-1]["prompt_tokens"], rows[-1]["recomputed"], rows[-1]["prefill_ms"]))
        return rows
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        logf.close()


def lower_bounds(port, model, reqs, tools):
    """Per request: its prompt's tokens after the longest common prefix with any earlier prompt
    of its session (what no engine can avoid computing), from hypic's /tokenize."""
    seen, out = {}, []
    for s, _, msgs in reqs:
        ids = post(port, "/tokenize", {"model": model, "messages": msgs, "tools": tools})["tokens"]
        best = 0
        for prev in seen.get(s, []):
            n = 0
            for x, y in zip(prev, ids):
                if x != y:
                    break
                n += 1
            best = max(best, n)
        seen.setdefault(s, []).append(ids)
        out.append(len(ids) - best)
    return out


def with_bounds(rows, bounds):
    for r, b in zip(rows, bounds):
        r["new_tokens"] = b


def summary(rows, warm_from):
    warm = [r for r in rows if r["turn"] >= warm_from]
    per_turn = {}
    for r in rows:
        per_turn.setdefault(r["turn"], []).append(r)
    return {
        "requests": len(rows),
        "prefill_ms_p50": statistics.median(r["prefill_ms"] for r in warm),
        "prefill_ms_mean": statistics.fmean(r["prefill_ms"] for r in warm),
        "recomputed_mean": statistics.fmean(r["recomputed"] for r in warm),
        "new_tokens_mean": statistics.fmean(r["new_tokens"] for r in warm),
        "prompt_tokens_last": max(r["prompt_tokens"] for r in rows),
        "per_turn": [{"turn": t, "prefill_ms": statistics.fmean(r["prefill_ms"] for r in rs),
                      "recomputed": statistics.fmean(r["recomputed"] for r in rs),
                      "new_tokens": statistics.fmean(r["new_tokens"] for r in rs),
                      "prompt_tokens": statistics.fmean(r["prompt_tokens"] for r in rs)}
                     for t, rs in sorted(per_turn.items())],
    }


def system_of(version):
    """`hypic --version` as the fields bench/plots.py reads (cpu, tier, commit, ...)."""
    f = dict(line.split(": ", 1) for line in version.splitlines()[1:] if ": " in line)
    m = re.match(r"hypic (\S+) \((\w+)\)", version)
    return {"cpu": f.get("CPU", "?"), "tier": f.get("ISA tier", "?"), "features": f.get("features", ""),
            "decode_kernel": f.get("decode", ""), "prefill_kernel": f.get("prefill", ""),
            "version": m.group(1) if m else "?", "commit": m.group(2) if m else "?"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hypic-bin", required=True)
    ap.add_argument("--model", required=True, help="a Qwen3.5 checkpoint directory")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--gguf", help="the same weights as GGUF, for llama-server")
    ap.add_argument("--llama-server", help="llama.cpp's llama-server binary (omit: hypic only)")
    ap.add_argument("--chat-template", help="the Qwen3.5 Jinja template for llama-server "
                                            "(llama.cpp's models/templates/Qwen3.5-4B.jinja)")
    ap.add_argument("--ctx-checkpoints", type=int, default=32, help="llama-server --ctx-checkpoints")
    ap.add_argument("--ctx-per-slot", type=int, default=16384)
    ap.add_argument("--llama-slots", type=int, default=0,
                    help="llama-server -np (default: one slot per session, each session sent to its own; "
                         "otherwise the server picks the slot)")
    ap.add_argument("--only-llama", action="store_true", help="run llama-server only (hypic serves /tokenize)")
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--tools", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=16, help="tokens each request decodes")
    ap.add_argument("--cache-mem", type=int, default=4096, help="MiB of cache for each engine")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--check", action="store_true",
                    help="only check that prefix and full modes give the same greedy replies (use --dtype f32)")
    a = ap.parse_args()
    reqs, tools = trace(a.seed, a.sessions, a.turns, a.tools)
    version = subprocess.run([a.hypic_bin, "--version"], capture_output=True, text=True).stdout
    log_dir = tempfile.mkdtemp(prefix="agent_turns-")
    out = {"bench": "agent_turns", "date": time.strftime("%Y-%m-%d"), "cpu": cpu(), "model": os.path.basename(os.path.normpath(a.model)),
           "dtype": a.dtype, "sessions": a.sessions, "turns": a.turns, "tools": a.tools, "max_tokens": a.max_tokens,
           "engines": {}, "hypic_system": system_of(version)}
    modes = ["prefix", "full"] if a.check else ["prefix", "hypic"]
    replies, bounds = {}, None
    for mode in modes:
        srv = Server(a, log_dir, mode, ["--reasoning", "on"]).start()
        try:
            if bounds is None:
                bounds = lower_bounds(srv.port, srv.model, reqs, tools)
            if a.only_llama:
                break
            rows = run_hypic(srv.port, srv.model, reqs, tools, mode, a.max_tokens, "agent-%s" % mode)
        finally:
            srv.stop()
        with_bounds(rows, bounds)
        replies[mode] = [r.pop("reply") for r in rows]
        out["engines"]["hypic-" + mode] = {"summary": summary(rows, 1), "rows": rows}
    if a.check:
        diff = [i for i, (x, y) in enumerate(zip(replies["prefix"], replies["full"])) if x != y]
        out["check"] = {"requests": len(reqs), "different": diff}
        print(json.dumps(out["check"]))
        return 1 if diff else 0
    if a.llama_server:
        if not (a.gguf and a.chat_template):
            raise SystemExit("--llama-server needs --gguf and --chat-template")
        rows = run_llama(a, reqs, tools, log_dir)
        with_bounds(rows, bounds)
        slots = a.llama_slots or a.sessions
        name = "llama-server" if slots == a.sessions else "llama-server-%dslot" % slots
        out["engines"][name] = {"summary": summary(rows, 1), "rows": rows,
                                "flags": {"ctx_checkpoints": a.ctx_checkpoints, "slots": slots}}
    print(json.dumps(out, indent=1))
    for name, e in out["engines"].items():
        s = e["summary"]
        log("%-13s prefill p50 %7.1f ms  mean %7.1f ms  recomputed %7.1f  new %6.1f tokens/request (turns >= 1)" % (
            name, s["prefill_ms_p50"], s["prefill_ms_mean"], s["recomputed_mean"], s["new_tokens_mean"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
