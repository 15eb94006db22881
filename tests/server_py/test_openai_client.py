#!/usr/bin/env python3
"""`hypic serve` driven by the official `openai` Python client (end to end, over HTTP).

Starts the built binary on an ephemeral loopback port with tests/models/qwen3_5_dense
(random weights: the text is gibberish, but greedy decoding makes it deterministic) and
checks what an OpenAI client sees: chat and completions, streaming with usage, models,
segments marked inline and their reuse, cache_salt isolation, error classes, the API key,
/v1/segments (when the binary has it), 16 concurrent streams against their sequential
references, and a client that disconnects mid-stream.

    python tests/server_py/test_openai_client.py --hypic-bin build/hypic [--source-dir .] [unittest args]

Needs the `openai` package (scripts/install.sh puts it in .venv). Without it the script
prints a SKIP line and exits 77 (ctest's SKIP_RETURN_CODE).
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
import uuid

SKIP_CODE = 77


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_proc import Process, parse_own_args as _parse_own_args, terminate, wait_for  # noqa: E402,F401 (terminate: for test_router)

OPTS, UNITTEST_ARGV = _parse_own_args(sys.argv)

try:
    import openai
except ImportError:
    print("SKIP: the 'openai' package is not importable by %s; run scripts/install.sh "
          "(it installs openai into .venv)" % sys.executable)
    sys.exit(SKIP_CODE)

if not OPTS["hypic_bin"] or not os.access(OPTS["hypic_bin"], os.X_OK):
    print("ERROR: the hypic binary is missing: pass --hypic-bin PATH (got %r)" % OPTS["hypic_bin"])
    sys.exit(2)

MODEL_DIR = os.path.join(OPTS["source_dir"], "tests", "models", "qwen3_5_dense")
MODEL = "qwen3_5_dense"  # the served name: the directory name
API_KEY = "test-key-123"
# Loopback must never go through a proxy (urllib and httpx both read these variables).
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"

_PORT_RE = re.compile(r"hypic serve: model '([^']*)' on http://([0-9.]+):(\d+)")


def discard(log_file):
    """Closes and removes a NamedTemporaryFile(delete=False) that held a process's stderr."""
    log_file.close()
    try:
        os.unlink(log_file.name)
    except OSError:
        pass


class HypicServer(Process):
    """One `hypic serve` process; its stderr (one JSON line per request) goes to a file."""

    def __init__(self, *extra_args, api_key=None, model_dir=MODEL_DIR):
        args = [OPTS["hypic_bin"], "serve", "--model", model_dir, "--port", "0",
                "--dtype", "f32", "--cache-mem", "64"] + list(extra_args)
        if api_key:
            args += ["--api-key", api_key]
        super().__init__(args, prefix="hypic-serve-")
        self._clients = []

    @property
    def base(self):
        return "http://127.0.0.1:%d" % self.port

    def start(self, timeout=30.0):
        def ready():
            status, body = http_get(self.base + "/health", timeout=2)
            return status == 200 and json.loads(body).get("status") == "ok"
        return self.spawn(_PORT_RE, 3, timeout, ready)

    def stop(self, timeout=10.0):
        """SIGTERM (graceful: running requests finish), then SIGKILL if it does not exit."""
        # Idle keep-alive connections would hold the server's shutdown for its keep-alive
        # timeout (5 s): close the clients first.
        for c in self._clients:
            try:
                c.close()
            except Exception:  # noqa: BLE001 - best effort
                pass
        self._clients = []
        return super().stop(timeout)

    def client(self, api_key=API_KEY, **kw):
        kw.setdefault("max_retries", 0)  # a 429 or a dropped connection must show, not be retried
        kw.setdefault("timeout", 60.0)
        c = openai.OpenAI(base_url=self.base + "/v1", api_key=api_key, **kw)
        self._clients.append(c)
        return c


def http_get(url, headers=None, timeout=10):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def http_json(method, url, body=None, headers=None, timeout=30):
    data = None if body is None else json.dumps(body).encode()
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    req = urllib.request.Request(url, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw.decode("utf-8", "replace")


def hypic_usage(usage):
    """usage.hypic (an extra field of the pydantic model) as a dict."""
    h = (usage.model_extra or {}).get("hypic")
    if h is None:
        h = getattr(usage, "hypic", None)
    return dict(h) if h is not None else None


def salt():
    return "t-" + uuid.uuid4().hex  # a fresh tenant: nothing of earlier tests is visible


DOC_A = ("The first document talks about rivers and lakes, the water cycle, rain that falls on "
         "hills and flows down to the sea, and the fish that live in cold clear streams.")
DOC_B = ("A second document, on mountains and valleys: granite peaks, glaciers carving U-shaped "
         "valleys, alpine meadows in summer and the villages built where the slopes are gentle.")


def seg_messages(docs, question="Summarise the documents.", marker="cache_control", system=None):
    parts = []
    for d in docs:
        p = {"type": "text", "text": d}
        if marker == "cache_control":
            p["cache_control"] = {"type": "segment"}
        else:
            p["hypic_segment"] = True
        parts.append(p)
    parts.append({"type": "text", "text": question})
    msgs = [{"role": "system", "content": system}] if system else []
    return msgs + [{"role": "user", "content": parts}]


def stream_text(stream):
    """Concatenated delta content, the finish reason, the usage chunk (or None), chunk count."""
    text, finish, usage, n = "", None, None, 0
    for ch in stream:
        n += 1
        if ch.usage is not None:
            usage = ch.usage
        for c in ch.choices:
            if c.delta is not None and c.delta.content:
                text += c.delta.content
            if c.finish_reason is not None:
                finish = c.finish_reason
    return text, finish, usage, n


def stream_in_background(client, messages, max_tokens):
    """Starts a streamed chat completion on a thread. Returns (thread, started, out): `started` is set
    once text flows (or the call ended), out["result"] = (text, finish reason) or out["error"]."""
    started, out = threading.Event(), {}

    def run():
        try:
            text, finish = "", None
            with client.chat.completions.create(model=MODEL, messages=messages, temperature=0,
                                                max_tokens=max_tokens, stream=True) as s:
                for ch in s:
                    for c in ch.choices:
                        if c.delta.content:
                            text += c.delta.content
                            started.set()
                        finish = c.finish_reason or finish
            out["result"] = (text, finish)
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            out["error"] = e
        finally:
            started.set()

    th = threading.Thread(target=run)
    th.start()
    return th, started, out


class ServerCase(unittest.TestCase):
    """A server per class (started in setUpClass, stopped by a class cleanup, which runs
    even when setUpClass fails half-way)."""
    SERVER_ARGS = ()
    SERVER_KEY = None
    SERVER_MODEL_DIR = MODEL_DIR

    @classmethod
    def setUpClass(cls):
        cls.server = HypicServer(*cls.SERVER_ARGS, api_key=cls.SERVER_KEY, model_dir=cls.SERVER_MODEL_DIR)
        cls.addClassCleanup(cls.server.cleanup)
        cls.server.start()
        cls.client = cls.server.client()

    def log_tail(self, n=20):
        return "\n--- server log (tail) ---\n" + "\n".join(self.server.log().splitlines()[-n:])


class ChatAndCompletions(ServerCase):
    CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me a story"}]

    def test_chat_non_streaming(self):
        r = self.client.chat.completions.create(model=MODEL, messages=self.CHAT, temperature=0,
                                                max_tokens=12, extra_body={"hypic": {"mode": "full"}})
        self.assertEqual(r.object, "chat.completion")
        self.assertEqual(r.model, MODEL)
        self.assertTrue(r.id.startswith("chatcmpl-"))
        self.assertEqual(len(r.choices), 1)
        c = r.choices[0]
        self.assertEqual(c.index, 0)
        self.assertEqual(c.message.role, "assistant")
        self.assertIsInstance(c.message.content, str)
        self.assertIn(c.finish_reason, ("stop", "length"))
        u = r.usage
        self.assertGreater(u.prompt_tokens, 0)
        self.assertTrue(1 <= u.completion_tokens <= 12, u)
        self.assertEqual(u.total_tokens, u.prompt_tokens + u.completion_tokens)
        self.assertEqual(u.prompt_tokens_details.cached_tokens, 0)  # mode full reuses nothing
        h = hypic_usage(u)
        self.assertIsNotNone(h, u)
        self.assertEqual(h["mode"], "full")
        for k in ("segments_hit", "segments_missed", "reused_tokens", "recomputed_tokens",
                  "seam_tokens", "ttft_ms"):
            self.assertIn(k, h)
        # Greedy is deterministic: the same request gives the same text.
        r2 = self.client.chat.completions.create(model=MODEL, messages=self.CHAT, temperature=0,
                                                 max_tokens=12, extra_body={"hypic": {"mode": "full"}})
        self.assertEqual(r2.choices[0].message.content, c.message.content)

    def test_streaming_matches_non_streaming(self):
        kw = dict(model=MODEL, messages=self.CHAT, temperature=0, max_tokens=16)
        ref = self.client.chat.completions.create(**kw)
        chunks = []
        with self.client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw) as s:
            for ch in s:
                chunks.append(ch)
        self.assertGreaterEqual(len(chunks), 3)
        for ch in chunks:
            self.assertEqual(ch.object, "chat.completion.chunk")
            self.assertEqual(ch.model, MODEL)
            self.assertEqual(ch.id, chunks[0].id)
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        self.assertEqual(text, ref.choices[0].message.content)
        self.assertEqual(finish, [ref.choices[0].finish_reason])
        # The usage chunk: last, no choices, same counts as the non-streaming answer.
        last = chunks[-1]
        self.assertEqual(last.choices, [])
        self.assertIsNotNone(last.usage)
        self.assertEqual(last.usage.completion_tokens, ref.usage.completion_tokens)
        self.assertEqual(last.usage.prompt_tokens, ref.usage.prompt_tokens)
        self.assertIsNotNone(hypic_usage(last.usage))
        self.assertTrue(all(c.usage is None for c in chunks[:-1]))
        # Without include_usage there is no usage chunk.
        with self.client.chat.completions.create(stream=True, **kw) as s:
            text2, finish2, usage2, _ = stream_text(s)
        self.assertEqual(text2, text)
        self.assertIsNone(usage2)

    def test_completions(self):
        kw = dict(model=MODEL, prompt="Once upon a time", max_tokens=6, temperature=0)
        r = self.client.completions.create(**kw)
        self.assertEqual(r.object, "text_completion")
        self.assertEqual(r.model, MODEL)
        self.assertIsInstance(r.choices[0].text, str)
        self.assertIn(r.choices[0].finish_reason, ("stop", "length"))
        self.assertTrue(1 <= r.usage.completion_tokens <= 6)
        with self.client.completions.create(stream=True, stream_options={"include_usage": True}, **kw) as s:
            parts, usage = [], None
            for ch in s:
                if ch.usage is not None:
                    usage = ch.usage
                parts.extend(c.text for c in ch.choices)
        self.assertEqual("".join(parts), r.choices[0].text)
        self.assertIsNotNone(usage)
        self.assertEqual(usage.completion_tokens, r.usage.completion_tokens)

    def test_logprobs(self):
        """Chat logprobs + top_logprobs and completions logprobs, parsed by the client: greedy's
        token is its own top alternative; a token-id prompt answers as its text does."""
        r = self.client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hello there"}],
                                                max_tokens=5, temperature=0, logprobs=True, top_logprobs=3)
        content = r.choices[0].logprobs.content
        self.assertEqual(len(content), r.usage.completion_tokens - (r.choices[0].finish_reason == "stop"))
        for e in content:
            self.assertEqual(len(e.top_logprobs), 3)
            self.assertEqual(e.top_logprobs[0].token, e.token)
            self.assertAlmostEqual(e.top_logprobs[0].logprob, e.logprob, places=6)
            self.assertLessEqual(e.logprob, 0.0)
            self.assertGreaterEqual(e.top_logprobs[1].logprob, e.top_logprobs[2].logprob)
        streamed = []
        with self.client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hello there"}],
                                                 max_tokens=5, temperature=0, logprobs=True, top_logprobs=3,
                                                 stream=True) as s:
            for ch in s:
                if ch.choices and ch.choices[0].logprobs is not None:
                    streamed.extend(ch.choices[0].logprobs.content)
        self.assertEqual([(e.token, e.logprob) for e in streamed], [(e.token, e.logprob) for e in content])
        plain = self.client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hello there"}],
                                                    max_tokens=5, temperature=0)
        self.assertIsNone(plain.choices[0].logprobs)
        self.assertEqual(plain.choices[0].message.content, r.choices[0].message.content)
        c = self.client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=4, temperature=0,
                                           logprobs=2)
        lp = c.choices[0].logprobs
        self.assertEqual(len(lp.tokens), len(lp.token_logprobs))
        self.assertEqual(len(lp.top_logprobs), len(lp.tokens))
        self.assertEqual(lp.text_offset[0], 0)
        with self.assertRaises(openai.BadRequestError):
            self.client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], max_tokens=1,
                                                logprobs=True, top_logprobs=21)
        # Log-likelihood scoring as evaluation harnesses ask for it: echo, logprobs, no new tokens.
        e = self.client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=0, echo=True, logprobs=1)
        self.assertEqual(e.choices[0].text, "Once upon a time")
        lp = e.choices[0].logprobs
        self.assertIsNone(lp.token_logprobs[0])
        self.assertTrue(all(x <= 0 for x in lp.token_logprobs[1:]))
        self.assertEqual("".join(lp.tokens), "Once upon a time")
        self.assertEqual(e.usage.completion_tokens, 0)

    def test_models_list(self):
        models = list(self.client.models.list())
        self.assertEqual([m.id for m in models], [MODEL])
        self.assertEqual(models[0].object, "model")
        self.assertEqual(self.client.models.retrieve(MODEL).id, MODEL)
        with self.assertRaises(openai.NotFoundError):
            self.client.models.retrieve("no-such-model")

    def test_max_completion_tokens(self):
        r = self.client.chat.completions.create(model=MODEL, messages=self.CHAT, temperature=0,
                                                max_completion_tokens=3)
        self.assertLessEqual(r.usage.completion_tokens, 3)


class Segments(ServerCase):
    def _chat(self, messages, tenant, max_tokens=6, **extra):
        body = {"cache_salt": tenant}
        body.update(extra)
        return self.client.chat.completions.create(model=MODEL, messages=messages, temperature=0,
                                                   max_tokens=max_tokens, extra_body=body)

    def test_inline_segments_are_reused(self):
        t = salt()
        msgs = seg_messages([DOC_A, DOC_B], system="Answer from the documents.")
        a = self._chat(msgs, t)
        ha = hypic_usage(a.usage)
        self.assertEqual(ha["mode"], "hypic")  # the default mode
        self.assertEqual(ha["segments_missed"], 2, ha)
        self.assertEqual(ha["segments_hit"], 0, ha)
        self.assertEqual(a.usage.prompt_tokens_details.cached_tokens, 0)
        b = self._chat(msgs, t)
        hb = hypic_usage(b.usage)
        self.assertEqual(hb["segments_hit"], 2, hb)
        self.assertEqual(hb["segments_missed"], 0, hb)
        self.assertGreater(b.usage.prompt_tokens_details.cached_tokens, 0)
        self.assertEqual(b.usage.prompt_tokens_details.cached_tokens, hb["reused_tokens"])
        # The same documents in the same place: the composed head is restored whole, seams
        # included; only the question is computed.
        self.assertEqual(hb["seam_tokens"], 0)
        self.assertEqual(hb["reused_tokens"] + hb["recomputed_tokens"], b.usage.prompt_tokens)
        self.assertEqual(b.usage.prompt_tokens, a.usage.prompt_tokens)
        # Cold and warm give the same text.
        self.assertEqual(b.choices[0].message.content, a.choices[0].message.content)
        # The documents in the other order, marked the other way: still both hits, composed
        # afresh (seams recomputed).
        c = self._chat(seg_messages([DOC_B, DOC_A], marker="hypic_segment",
                                    system="Answer from the documents."), t)
        self.assertEqual(hypic_usage(c.usage)["segments_hit"], 2)
        self.assertGreater(hypic_usage(c.usage)["seam_tokens"], 0)

    def test_segments_streaming_usage(self):
        t = salt()
        msgs = seg_messages([DOC_A])
        self._chat(msgs, t)
        with self.client.chat.completions.create(
                model=MODEL, messages=msgs, temperature=0, max_tokens=6, stream=True,
                stream_options={"include_usage": True}, extra_body={"cache_salt": t}) as s:
            _, _, usage, _ = stream_text(s)
        self.assertIsNotNone(usage)
        self.assertGreater(usage.prompt_tokens_details.cached_tokens, 0)
        self.assertEqual(hypic_usage(usage)["segments_hit"], 1)

    def test_cache_salt_isolates_tenants(self):
        msgs = seg_messages([DOC_A], question="What is this about?")
        t1, t2 = salt(), salt()
        a = self._chat(msgs, t1)
        b = self._chat(msgs, t2)
        for r in (a, b):
            h = hypic_usage(r.usage)
            self.assertEqual((h["segments_hit"], h["segments_missed"]), (0, 1), h)
            self.assertEqual(r.usage.prompt_tokens_details.cached_tokens, 0)
        # Each tenant hits its own entry.
        self.assertEqual(hypic_usage(self._chat(msgs, t1).usage)["segments_hit"], 1)
        self.assertEqual(hypic_usage(self._chat(msgs, t2).usage)["segments_hit"], 1)

    def test_cache_salt_isolates_tenants_in_prefix_mode(self):
        msgs = seg_messages([DOC_B], question="What is this about?")
        t1, t2 = salt(), salt()
        a = self._chat(msgs, t1, hypic={"mode": "prefix"})
        self.assertEqual(hypic_usage(a.usage)["segments_missed"], 1)
        b = self._chat(msgs, t2, hypic={"mode": "prefix"})
        hb = hypic_usage(b.usage)
        self.assertEqual((hb["segments_hit"], hb["segments_missed"]), (0, 1), hb)
        self.assertEqual(b.usage.prompt_tokens_details.cached_tokens, 0)

    def test_prefix_mode_restores_earlier_turns(self):
        # An agent's conversation grows by two messages a turn: prefix mode restores every
        # earlier message from its checkpoint and computes the new ones (and the same answer
        # as full).
        t = salt()
        msgs = [{"role": "system", "content": "You are terse."},
                {"role": "user", "content": "What is a prime number?"}]
        first = self._chat(msgs, t, hypic={"mode": "prefix"})
        h1 = hypic_usage(first.usage)
        msgs += [{"role": "assistant", "content": first.choices[0].message.content},
                 {"role": "user", "content": "And an even one?"}]
        second = self._chat(msgs, t, hypic={"mode": "prefix"})
        h2 = hypic_usage(second.usage)
        # Everything before the first reply comes back (the first prompt less its generation
        # prompt); the reply, the new question and the generation prompt are computed.
        gen_prompt = first.usage.prompt_tokens - h1["cached_new_tokens"]
        self.assertEqual(h1["reused_tokens"], 0, h1)
        self.assertEqual(h2["reused_tokens"], h1["cached_new_tokens"], h2)
        self.assertTrue(0 < gen_prompt <= 8, h1)  # '<|im_start|>assistant\n' in some tokenisation
        self.assertEqual(h2["reused_tokens"] + h2["recomputed_tokens"], second.usage.prompt_tokens)
        full = self._chat(msgs, t, hypic={"mode": "full"})
        self.assertEqual(second.choices[0].message.content, full.choices[0].message.content)

    def test_hypic_mode_restores_earlier_turns_after_the_tools(self):
        # An agent: tool descriptions as segments (they open the system turn), then a
        # conversation that grows by turns. The composed head and every message after it are
        # checkpoints: turn two reuses as much as prefix mode does, and computes the same count.
        tools = [{"type": "function", "function": {"name": n, "description": "Looks up " + n,
                  "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}
                 for n in ("weather", "calendar", "stocks")]
        turn1 = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Plan my day."}]
        usage = {}
        for mode in ("prefix", "hypic"):
            t = salt()
            extra = {"tools": tools}
            first = self._chat(turn1, t, hypic={"mode": mode, "auto_segments": ["tools"]}, **extra)
            turn2 = turn1 + [{"role": "assistant", "content": first.choices[0].message.content or "Sure."},
                             {"role": "user", "content": "And tomorrow?"}]
            second = self._chat(turn2, t, hypic={"mode": mode, "auto_segments": ["tools"]}, **extra)
            usage[mode] = hypic_usage(second.usage)
            self.assertEqual(usage[mode]["segments_hit"], 3, usage)
        self.assertEqual(usage["hypic"]["reused_tokens"], usage["prefix"]["reused_tokens"], usage)
        self.assertEqual(usage["hypic"]["recomputed_tokens"], usage["prefix"]["recomputed_tokens"], usage)
        self.assertLess(usage["hypic"]["recomputed_tokens"], usage["hypic"]["reused_tokens"] / 4, usage)

    def test_per_request_mode_and_seam(self):
        t = salt()
        msgs = seg_messages([DOC_A, DOC_B])
        full = self._chat(msgs, t, hypic={"mode": "full"})
        self.assertEqual(hypic_usage(full.usage)["mode"], "full")
        self.assertEqual(full.usage.prompt_tokens_details.cached_tokens, 0)
        self._chat(msgs, t, hypic={"mode": "prefix"})
        p = self._chat(msgs, t, hypic={"mode": "prefix"})
        self.assertEqual(hypic_usage(p.usage)["mode"], "prefix")
        self.assertGreater(p.usage.prompt_tokens_details.cached_tokens, 0)
        # prefix mode is exact.
        self.assertEqual(p.choices[0].message.content, full.choices[0].message.content)
        self._chat(msgs, t, hypic={"mode": "hypic", "seam": 4})
        h = hypic_usage(self._chat(seg_messages([DOC_B, DOC_A]), t, hypic={"mode": "hypic", "seam": 4}).usage)
        self.assertEqual(h["segments_hit"], 2)
        self.assertEqual(h["seam_tokens"], 8)  # 2 segments x seam 4

    def _segments_endpoint_or_skip(self):
        st, body = http_json("GET", self.server.base + "/v1/segments")
        if st == 404 and isinstance(body, dict) and body.get("error", {}).get("code") == "unknown_url":
            self.skipTest("this binary has no /v1/segments yet (GET /v1/segments -> 404 unknown_url)")
        self.assertEqual(st, 200, body)

    def test_registered_segment_referenced_by_id(self):
        self._segments_endpoint_or_skip()
        t = salt()
        reg = self.client.post("/segments", cast_to=object,
                               body={"text": DOC_A, "cache_salt": t})
        self.assertIsInstance(reg, dict, reg)
        sid = reg["id"]
        self.assertTrue(sid.startswith("seg_"), reg)
        self.assertGreater(reg["tokens"], 0)
        # Listed for its tenant only.
        st, lst = http_json("GET", self.server.base + "/v1/segments?cache_salt=" + t)
        self.assertEqual(st, 200, lst)
        self.assertIn(sid, [s["id"] for s in lst["data"]])
        st, other = http_json("GET", self.server.base + "/v1/segments?cache_salt=" + salt())
        self.assertNotIn(sid, [s["id"] for s in other["data"]])
        # Referenced by id: a hit, the same prompt (and text) as the document inline.
        by_id = [{"role": "user", "content": [{"type": "segment", "segment_id": sid},
                                              {"type": "text", "text": "What is this about?"}]}]
        r = self._chat(by_id, t)
        h = hypic_usage(r.usage)
        self.assertEqual((h["segments_hit"], h["segments_missed"]), (1, 0), h)
        self.assertGreater(r.usage.prompt_tokens_details.cached_tokens, 0)
        inline = self._chat(seg_messages([DOC_A], question="What is this about?"), t)
        self.assertEqual(hypic_usage(inline.usage)["segments_hit"], 1)
        self.assertEqual(inline.usage.prompt_tokens, r.usage.prompt_tokens)
        self.assertEqual(inline.choices[0].message.content, r.choices[0].message.content)
        # Another tenant cannot use the id.
        with self.assertRaises(openai.NotFoundError):
            self._chat(by_id, salt())
        # Deleted: gone.
        st, d = http_json("DELETE", self.server.base + "/v1/segments/%s?cache_salt=%s" % (sid, t))
        self.assertEqual(st, 200, d)
        with self.assertRaises(openai.NotFoundError):
            self._chat(by_id, t)


class AutoSegments(ServerCase):
    """--auto-segments separator: an unmodified client's documents, cut at <<PIC_SEP>>, are
    segments that hit in any order, with the answer of the same documents marked by hand."""
    SERVER_ARGS = ("--auto-segments", "separator")

    def ask(self, content, salt, **kw):
        return self.client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}],
                                                   max_tokens=6, temperature=0, extra_body={"cache_salt": salt, **kw})

    def test_separated_documents_hit_in_any_order(self):
        s = salt()
        r1 = self.ask(DOC_A + "<<PIC_SEP>>" + DOC_B + "<<PIC_SEP>>Which is about water?", s)
        h1 = hypic_usage(r1.usage)
        self.assertEqual((h1["auto_segments"], h1["segments_missed"], h1["segments_hit"]), (2, 2, 0), h1)
        r2 = self.ask(DOC_B + "<<PIC_SEP>>" + DOC_A + "<<PIC_SEP>>Which is about water?", s)
        h2 = hypic_usage(r2.usage)
        self.assertEqual((h2["segments_hit"], h2["segments_missed"]), (2, 0), h2)
        marked = self.client.chat.completions.create(
            model=MODEL, messages=seg_messages([DOC_B, DOC_A], "Which is about water?"), max_tokens=6, temperature=0,
            extra_body={"cache_salt": s})
        self.assertEqual(r2.choices[0].message.content, marked.choices[0].message.content)
        self.assertEqual(hypic_usage(marked.usage)["segments_hit"], 2)
        # A request may opt out: the text stays whole (separators removed).
        off = self.ask(DOC_A + "<<PIC_SEP>>Which?", s, hypic={"auto_segments": False})
        h3 = hypic_usage(off.usage)
        self.assertEqual(h3["segments_hit"] + h3["segments_missed"], 0, h3)
        self.assertNotIn("auto_segments", h3)

    def test_completions_prompt_is_cut_too(self):
        s = salt()
        p = DOC_A + "<<PIC_SEP>>" + DOC_B + "<<PIC_SEP>>Summary:"
        a = self.client.completions.create(model=MODEL, prompt=p, max_tokens=4, temperature=0,
                                           extra_body={"cache_salt": s})
        b = self.client.completions.create(model=MODEL, prompt=p, max_tokens=4, temperature=0,
                                           extra_body={"cache_salt": s})
        self.assertEqual(hypic_usage(a.usage)["segments_missed"], 2)
        self.assertEqual(hypic_usage(b.usage)["segments_hit"], 2)
        self.assertEqual(a.choices[0].text, b.choices[0].text)


class Errors(ServerCase):
    def test_malformed_requests_are_bad_request(self):
        cases = [
            dict(messages=[{"role": "user", "content": "hi"}], n=17),
            dict(messages=[{"role": "user", "content": "hi"}], temperature=5),
            dict(messages=[{"role": "assistant", "content": "hi"}]),
            dict(messages=[]),
            dict(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]),
            dict(messages=[{"role": "user", "content": "hi"}], max_tokens=0),
        ]
        for kw in cases:
            with self.subTest(kw=kw):
                with self.assertRaises(openai.BadRequestError) as cm:
                    self.client.chat.completions.create(model=MODEL, **kw)
                e = cm.exception
                self.assertEqual(e.status_code, 400)
                self.assertEqual(e.type, "invalid_request_error")
                self.assertIsInstance(e.body, dict)
                self.assertIn("message", e.body)

    def test_bad_request_param_and_code(self):
        with self.assertRaises(openai.BadRequestError) as cm:
            self.client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], n=17)
        self.assertEqual(cm.exception.param, "n")
        # A streaming request that is invalid fails before the stream starts.
        with self.assertRaises(openai.BadRequestError):
            self.client.chat.completions.create(model=MODEL, stream=True, top_p=0,
                                                messages=[{"role": "user", "content": "hi"}])
        # Text between two segments has no place in the layout.
        msgs = [{"role": "user", "content": [
            {"type": "text", "text": DOC_A, "cache_control": {"type": "segment"}},
            {"type": "text", "text": "in between"},
            {"type": "text", "text": DOC_B, "cache_control": {"type": "segment"}}]}]
        with self.assertRaises(openai.BadRequestError):
            self.client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=2)

    def test_context_length_exceeded(self):
        with self.assertRaises(openai.BadRequestError) as cm:
            self.client.chat.completions.create(model=MODEL, max_tokens=4096,
                                                messages=[{"role": "user", "content": "hi"}])
        self.assertEqual(cm.exception.code, "context_length_exceeded")

    def test_unknown_model_is_not_found(self):
        with self.assertRaises(openai.NotFoundError) as cm:
            self.client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])
        self.assertEqual(cm.exception.status_code, 404)
        self.assertEqual(cm.exception.param, "model")
        with self.assertRaises(openai.NotFoundError):
            self.client.completions.create(model="gpt-9", prompt="hi", max_tokens=1)

    def test_unknown_route_is_not_found(self):
        with self.assertRaises(openai.NotFoundError) as cm:
            self.client.embeddings.create(model=MODEL, input="hi")
        self.assertEqual(cm.exception.code, "unknown_url")

    def test_server_still_serves_after_errors(self):
        for _ in range(3):
            with self.assertRaises(openai.BadRequestError):
                self.client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], n=99)
        r = self.client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                                max_tokens=2, temperature=0)
        self.assertEqual(r.object, "chat.completion")


class ApiKey(ServerCase):
    SERVER_KEY = API_KEY

    def test_right_key(self):
        r = self.client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                                max_tokens=2, temperature=0)
        self.assertEqual(r.object, "chat.completion")
        self.assertEqual([m.id for m in self.client.models.list()], [MODEL])

    def test_wrong_key_is_authentication_error(self):
        bad = lambda: self.server.client(api_key="wrong-key")
        with self.assertRaises(openai.AuthenticationError) as cm:
            bad().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=2)
        self.assertEqual(cm.exception.status_code, 401)
        self.assertEqual(cm.exception.code, "invalid_api_key")
        with self.assertRaises(openai.AuthenticationError):
            bad().models.list()
        with self.assertRaises(openai.AuthenticationError):
            bad().completions.create(model=MODEL, prompt="hi", max_tokens=1)
        with self.assertRaises(openai.AuthenticationError):
            bad().chat.completions.create(model=MODEL, stream=True, max_tokens=2,
                                          messages=[{"role": "user", "content": "hi"}])

    def test_keep_alive_after_401(self):
        """A request rejected for its key must not break the next one on the same connection.

        The 401 is answered before the body is read; when the body arrives after the headers
        (as httpx sends it), its bytes are parsed as the next request (400 "HTTP error 400")
        and the real next request is lost. The openai client reuses connections, so after one
        401 the next call fails with BadRequestError."""
        body = json.dumps({"model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}).encode()
        head = ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer wrong\r\n"
                "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)).encode()
        nxt = b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + API_KEY.encode() + b"\r\n\r\n"
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=5) as s:
            data, closed, deadline = b"", False, time.monotonic() + 5
            try:
                s.sendall(head)
                time.sleep(0.05)  # the body in its own segment, after the headers
                s.sendall(body)
                time.sleep(0.2)
                s.sendall(nxt)
            except OSError:  # closed after the 401: fine
                pass
            while len(re.findall(rb"HTTP/1\.1 \d+", data)) < 2 and time.monotonic() < deadline:
                try:
                    d = s.recv(65536)
                except socket.timeout:
                    break
                if not d:
                    closed = True
                    break
                data += d
        statuses = re.findall(rb"HTTP/1\.1 (\d+)", data)
        self.assertEqual(statuses[:1], [b"401"], data)
        # Either the server closes the connection after the 401 (the client then opens a new
        # one), or the next answer on it is the model list.
        if len(statuses) > 1:
            self.assertEqual(statuses[1], b"200", data)
        else:
            self.assertTrue(closed, data)

    def test_health_needs_no_key(self):
        st, body = http_get(self.server.base + "/health")
        self.assertEqual(st, 200)
        self.assertEqual(json.loads(body)["status"], "ok")
        st, _ = http_get(self.server.base + "/v1/models")
        self.assertEqual(st, 401)


def metrics_value(base, name):
    """The value of an unlabelled Prometheus sample, or None without /metrics."""
    st, body = http_get(base + "/metrics")
    if st != 200:
        return None
    for line in body.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


class Concurrency(ServerCase):
    SERVER_ARGS = ("--max-concurrency", "4", "--max-queue", "32")
    N = 16
    MAX_TOKENS = 20

    def _prompt(self, i):
        topics = ["rivers", "mountains", "cities", "music", "stars", "bread", "trains", "forests"]
        return [{"role": "system", "content": "You answer in one line."},
                {"role": "user", "content": "Client %d asks about %s, number %d please." % (i, topics[i % 8], i * 7)}]

    def _stream(self, i, client=None):
        c = client or self.client
        with c.chat.completions.create(model=MODEL, messages=self._prompt(i), temperature=0,
                                       max_tokens=self.MAX_TOKENS, stream=True,
                                       stream_options={"include_usage": True}) as s:
            return stream_text(s)

    def test_16_concurrent_streams_match_sequential(self):
        ref = [self._stream(i) for i in range(self.N)]
        for text, finish, usage, _ in ref:
            self.assertIsNotNone(usage)
            self.assertIn(finish, ("stop", "length"))
        self.assertGreater(len(set(r[0] for r in ref)), 1, "different prompts should give different texts")
        results = [None] * self.N
        errors = [None] * self.N
        barrier = threading.Barrier(self.N)

        def worker(i):
            try:
                client = self.server.client()  # a client (connection pool) per thread
                barrier.wait(timeout=30)
                results[i] = self._stream(i, client)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors[i] = e

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(self.N)]
        t0 = time.monotonic()
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=120)
        wall = time.monotonic() - t0
        self.assertFalse(any(th.is_alive() for th in threads), "clients still running after 120 s")
        self.assertEqual(errors, [None] * self.N, self.log_tail())
        for i in range(self.N):
            with self.subTest(client=i):
                self.assertEqual(results[i][0], ref[i][0])
                self.assertEqual(results[i][1], ref[i][1])
                self.assertEqual(results[i][2].completion_tokens, ref[i][2].completion_tokens)
                self.assertEqual(results[i][2].prompt_tokens, ref[i][2].prompt_tokens)
        # Every request was logged as served (no 429 with a queue of 32 behind 4 workers). The
        # server writes a request's line before its last bytes go out; the test still waits for
        # the count (a condition, not a sleep) rather than rely on that order.
        def statuses():
            return [l.get("status") for l in self.server.log_lines() if l.get("path") == "/v1/chat/completions"]
        wait_for(lambda: statuses().count(200) >= 2 * self.N, timeout=30)
        self.assertEqual(statuses().count(200), 2 * self.N, statuses())
        sys.stderr.write("[concurrency: %d streams in %.2f s] " % (self.N, wall))


class Disconnect(ServerCase):
    # One worker and no queue: a new request is admitted only once the worker is free.
    SERVER_ARGS = ("--max-concurrency", "1", "--max-queue", "0")

    def test_client_disconnect_mid_stream_frees_the_slot(self):
        msgs = [{"role": "user", "content": "Write a very long story about a lighthouse."}]
        stream = self.client.chat.completions.create(model=MODEL, messages=msgs, temperature=0,
                                                     max_tokens=3500, stream=True)
        got = ""
        for ch in stream:
            if ch.choices and ch.choices[0].delta.content:
                got += ch.choices[0].delta.content
                break
        first_id = ch.id
        stream.close()  # drops the connection mid-stream
        self.assertTrue(got)
        t0 = time.monotonic()
        served, rejected = None, 0
        while time.monotonic() - t0 < 10:
            try:
                served = self.client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=2, temperature=0)
                break
            except openai.RateLimitError:  # the worker has not noticed yet
                rejected += 1
                time.sleep(0.02)
        waited = time.monotonic() - t0
        self.assertIsNotNone(served, "no request admitted within 10 s of the disconnect" + self.log_tail())
        self.assertLess(waited, 5.0, self.log_tail())
        # The server logged the dropped stream as cancelled (499), not as finished (200).
        lines = [l for l in self.server.log_lines() if l.get("id") == first_id]
        self.assertEqual([l.get("status") for l in lines], [499], "log of %s: %s%s" % (first_id, lines, self.log_tail()))
        st, body = http_get(self.server.base + "/health")
        self.assertEqual((st, json.loads(body)["status"]), (200, "ok"))
        running = metrics_value(self.server.base, "hypic_running_requests")
        if running is not None:
            deadline = time.monotonic() + 5
            while running != 0 and time.monotonic() < deadline:
                time.sleep(0.05)
                running = metrics_value(self.server.base, "hypic_running_requests")
            self.assertEqual(running, 0)
        sys.stderr.write("[slot free after %.3f s, %d x 429] " % (waited, rejected))


def split_reasoning(text):
    """A reply that starts inside Qwen3.5's <think> block: (reasoning, content), as the server
    reads it (the newlines around </think> belong to neither)."""
    if "</think>" not in text:
        return text.rstrip("\n"), ""
    r, c = text.split("</think>", 1)
    return r.rstrip("\n"), c.lstrip("\n")


class Reasoning(ServerCase):
    """--reasoning on (Qwen3.5's <think> block) on the test model: the generation prompt opens the
    block (or writes it closed with enable_thinking false, or for a constrained reply), and the
    reply comes back as reasoning_content and content, the same whole and streamed, and the
    same as the raw completion of that prompt read apart."""
    SERVER_ARGS = ("--reasoning", "on")
    ASK = [{"role": "user", "content": "Why is the sky blue?"}]

    def prompt_ids(self, **extra):
        st, body = http_json("POST", self.server.base + "/tokenize", dict(model=MODEL, messages=self.ASK, **extra))
        self.assertEqual(st, 200, body)
        return body["tokens"]

    def detok(self, ids):
        st, body = http_json("POST", self.server.base + "/detokenize", {"model": MODEL, "tokens": ids})
        self.assertEqual(st, 200, body)
        return body["prompt"]

    def test_props_say_so(self):
        st, props = http_json("GET", self.server.base + "/props")
        self.assertEqual((st, props["reasoning"]), (200, True), props)

    def test_reply_is_read_apart(self):
        ids = self.prompt_ids()
        self.assertTrue(self.detok(ids).endswith("<|im_start|>assistant\n<think>\n"), self.detok(ids))
        raw = self.client.completions.create(model=MODEL, prompt=ids, max_tokens=24, temperature=0).choices[0].text
        want_r, want_c = split_reasoning(raw)
        self.assertTrue(want_r)
        m = self.client.chat.completions.create(model=MODEL, messages=self.ASK, max_tokens=24, temperature=0).choices[0].message
        self.assertEqual(((m.model_extra or {}).get("reasoning_content", ""), m.content or ""), (want_r, want_c))
        reasoning, content = "", ""
        for ch in self.client.chat.completions.create(model=MODEL, messages=self.ASK, max_tokens=24, temperature=0,
                                                      stream=True):
            if ch.choices:
                d = ch.choices[0].delta
                reasoning += (d.model_extra or {}).get("reasoning_content") or ""
                content += d.content or ""
        self.assertEqual((reasoning, content), (want_r, want_c))

    def test_thinking_off_and_constrained_replies_close_the_block(self):
        closed = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
        off = {"chat_template_kwargs": {"enable_thinking": False}}
        self.assertTrue(self.detok(self.prompt_ids(**off)).endswith(closed))
        self.assertTrue(self.detok(self.prompt_ids(response_format={"type": "json_object"})).endswith(closed))
        ids = self.prompt_ids(**off)
        raw = self.client.completions.create(model=MODEL, prompt=ids, max_tokens=12, temperature=0).choices[0].text
        m = self.client.chat.completions.create(model=MODEL, messages=self.ASK, max_tokens=12, temperature=0,
                                                extra_body=off).choices[0].message
        self.assertEqual(m.content, raw)
        self.assertNotIn("reasoning_content", m.model_extra or {})

    def test_earlier_reasoning_is_dropped_and_the_rest_restored(self):
        # A turn's reasoning is dropped from the next prompt (as the template does): prefix
        # mode still restores everything before that reply.
        t = salt()
        first = self.client.chat.completions.create(model=MODEL, messages=self.ASK, max_tokens=8, temperature=0,
                                                    extra_body={"cache_salt": t, "hypic": {"mode": "prefix"}})
        m = first.choices[0].message
        msgs = self.ASK + [{"role": "assistant", "content": m.content or "",
                            "reasoning_content": (m.model_extra or {}).get("reasoning_content", "")},
                           {"role": "user", "content": "And at sunset?"}]
        second = self.client.chat.completions.create(model=MODEL, messages=msgs, max_tokens=8, temperature=0,
                                                     extra_body={"cache_salt": t, "hypic": {"mode": "prefix"}})
        h1, h2 = hypic_usage(first.usage), hypic_usage(second.usage)
        self.assertEqual(h2["reused_tokens"], h1["cached_new_tokens"], (h1, h2))
        st, body = http_json("POST", self.server.base + "/tokenize", {"model": MODEL, "messages": msgs})
        self.assertEqual(self.detok(body["tokens"]).count("<think>"), 1)  # the generation prompt's only


class ScatterCombine(unittest.TestCase):
    """`hypic serve --scatter-workers` (the combine worker of segment parallelism): cold
    segments are built by a `hypic worker` process, and the answers are those of a plain
    server, cold and warm."""

    def _start_worker(self):
        env = dict(os.environ)
        env.setdefault("OMP_WAIT_POLICY", "passive")
        log = tempfile.NamedTemporaryFile(prefix="hypic-worker-", suffix=".log", delete=False)
        proc = subprocess.Popen([OPTS["hypic_bin"], "worker", "--model", MODEL_DIR, "--port", "0",
                                 "--dtype", "f32"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=log, env=env)
        self.addCleanup(lambda: (proc.poll() is None and proc.kill(), proc.wait(10), discard(log)))

        def text():
            with open(log.name, encoding="utf-8", errors="replace") as f:
                return f.read()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = re.search(r"hypic worker: model .* on [0-9.]+:(\d+)", text())  # not the log lines' times
            if m:
                return "127.0.0.1:" + m.group(1)
            self.assertIsNone(proc.poll(), text())
            time.sleep(0.05)
        self.fail("hypic worker printed no port:\n" + text())

    def test_same_answers_as_a_single_instance(self):
        worker = self._start_worker()
        plain = HypicServer().start()
        self.addCleanup(plain.cleanup)
        combine = HypicServer("--scatter-workers", worker).start()
        self.addCleanup(combine.cleanup)
        msgs = seg_messages([DOC_A, DOC_B], system="Answer from the documents.")
        ask = lambda srv: srv.client().chat.completions.create(
            model=MODEL, messages=msgs, temperature=0, max_tokens=8, extra_body={"cache_salt": "s"})
        want = ask(plain).choices[0].message.content
        cold = ask(combine)
        warm = ask(combine)
        self.assertEqual(cold.choices[0].message.content, want)
        self.assertEqual(warm.choices[0].message.content, want)
        sc = hypic_usage(cold.usage)["scatter"]
        self.assertEqual(sc["built_remote"] + sc["built_local"], 2, sc)  # LPT over the worker + 1 local lane
        self.assertGreaterEqual(sc["built_remote"], 1, sc)
        self.assertEqual(hypic_usage(warm.usage)["segments_hit"], 2)
        self.assertEqual(hypic_usage(warm.usage)["scatter"]["built_remote"], 0)


class GracefulShutdown(unittest.TestCase):
    def test_sigterm_lets_the_running_stream_finish_and_exits_0(self):
        server = HypicServer()
        self.addCleanup(server.cleanup)
        server.start()
        client = server.client()
        msgs = [{"role": "user", "content": "A story, please."}]
        ref = client.chat.completions.create(model=MODEL, messages=msgs, temperature=0, max_tokens=200)
        th, started, out = stream_in_background(client, msgs, 200)
        self.assertTrue(started.wait(timeout=30))
        server.proc.send_signal(signal.SIGTERM)  # mid-stream
        th.join(timeout=60)
        self.assertFalse(th.is_alive())
        rc = server.stop(timeout=30)
        self.assertNotIn("error", out, out.get("error"))
        self.assertEqual(rc, 0, server.log())
        self.assertIn("hypic serve: stopped", server.log())
        # The running stream was not cut short.
        self.assertEqual(out["result"], (ref.choices[0].message.content, ref.choices[0].finish_reason))


if __name__ == "__main__":
    unittest.main(argv=UNITTEST_ARGV, verbosity=2)
