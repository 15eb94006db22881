#!/usr/bin/env python3
"""`hypic router` with `hypic serve --grpc-port --join` instances and `hypic worker --join`
scatter workers, as separate processes on loopback, driven by the official `openai` client.

Checks that a request through the router gets exactly a single instance's answer, cold and
warm (streaming too); that warm requests follow their segments (cache affinity); that a
worker killed mid-request, or an instance killed between requests, does not change the
answer; that members join and leave while the router runs; and the router's errors.
ClusterAuth: a member with a wrong cluster token, or without TLS when TLS is on, is refused.
With HYPIC_TEST_CLUSTER_SECURE=1 every router, instance and worker runs with a cluster token
and mutual TLS (certificates made by tests/common/make_certs.sh), so the whole suite runs
over the authenticated cluster (ctest: server_py.router_secure).

    python tests/server_py/test_router.py --hypic-bin build/hypic [--source-dir .]
"""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import test_openai_client as base  # noqa: E402 - parses --hypic-bin / --source-dir, SKIPs without openai
from test_openai_client import (DOC_A, DOC_B, MODEL, MODEL_DIR, OPTS, HypicServer, http_get, http_json, hypic_usage,
                                discard, seg_messages, stream_text, terminate)
from server_proc import recorded  # noqa: E402

openai = base.openai

DOCS = [DOC_A, DOC_B] + [
    "Document %d lists the harbours of the northern coast: %s." % (i, ", ".join("port %d-%d" % (i, j) for j in range(25)))
    for i in range(3, 9)]


SECURE = os.environ.get("HYPIC_TEST_CLUSTER_SECURE") == "1"
CERTS = tempfile.mkdtemp(prefix="hypic-certs-")
TOKEN = "test-cluster-token-" + os.urandom(8).hex()


def setUpModule():
    subprocess.run(["sh", os.path.join(OPTS["source_dir"], "tests", "common", "make_certs.sh"), CERTS], check=True)


def tearDownModule():
    shutil.rmtree(CERTS, True)


def tls_args(member="member", ca="ca"):
    return ["--tls-cert", os.path.join(CERTS, member + ".pem"), "--tls-key", os.path.join(CERTS, member + ".key"),
            "--tls-ca", os.path.join(CERTS, ca + ".pem")]


def secure_args():
    """What every cluster member gets in the secure run (explicit flags given later override)."""
    return ["--cluster-token", TOKEN] + tls_args() if SECURE else []


class Proc:
    """A hypic child process whose stderr goes to a file; waits for a line matching `ready`."""

    def __init__(self, args, ready, secure=True):
        self.args = [OPTS["hypic_bin"]] + args[:1] + (secure_args() if secure else []) + args[1:]
        self.ready = re.compile(ready)
        self.log_file = tempfile.NamedTemporaryFile(prefix="hypic-%s-" % args[0], suffix=".log", delete=False)
        env = dict(os.environ)
        env.setdefault("OMP_WAIT_POLICY", "passive")
        env.pop("HYPIC_API_KEY", None)
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.log_file, env=env)

    def log(self):
        with open(self.log_file.name, encoding="utf-8", errors="replace") as f:
            return f.read()

    def wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = self.ready.search(self.log())
            if m:
                return m
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %d:\n%s" % (self.args[1], self.proc.returncode, self.log()))
            time.sleep(0.02)
        raise RuntimeError("%s not ready within %ds:\n%s" % (self.args[1], timeout, self.log()))

    def signal(self, sig):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def stop(self, timeout=15):
        return terminate(self.proc, timeout)

    def cleanup(self):
        self.stop()
        discard(self.log_file)


def start_router(test, *extra, secure=True):
    r = Proc(["router", "--port", "0", "--grpc-port", "0", "--probe-interval-ms", "200"] + list(extra),
             r"http://127\.0\.0\.1:(\d+), members join at 127\.0\.0\.1:(\d+)", secure)
    test.addClassCleanup(r.cleanup) if isinstance(test, type) else test.addCleanup(r.cleanup)
    m = r.wait_ready()
    r.base, r.join = "http://127.0.0.1:%d" % recorded(int(m.group(1))), "127.0.0.1:%s" % m.group(2)
    return r


def start_instance(test, router, *extra, secure=True):
    p = Proc(["serve", "--model", MODEL_DIR, "--port", "0", "--grpc-port", "0", "--dtype", "f32",
              "--cache-mem", "64", "--join", router.join] + list(extra),
             r"Combine gRPC on 127\.0\.0\.1:(\d+)", secure)
    test.addClassCleanup(p.cleanup) if isinstance(test, type) else test.addCleanup(p.cleanup)
    p.address = "127.0.0.1:%s" % p.wait_ready().group(1)
    return p


def start_worker(test, router, *extra, secure=True):
    p = Proc(["worker", "--model", MODEL_DIR, "--port", "0", "--dtype", "f32", "--join", router.join] + list(extra),
             r" on 127\.0\.0\.1:(\d+)[ \n]", secure)
    test.addClassCleanup(p.cleanup) if isinstance(test, type) else test.addCleanup(p.cleanup)
    p.address = "127.0.0.1:%s" % p.wait_ready().group(1)
    return p


def cluster(router):
    status, body = http_get(router.base + "/v1/cluster")
    assert status == 200, body
    return json.loads(body)


def wait_members(router, want, timeout=20):
    """Waits until the healthy members are exactly `want` ({address: role})."""
    deadline = time.monotonic() + timeout
    while True:
        got = {m["address"]: m["role"] for m in cluster(router)["members"] if m["healthy"]}
        if got == want:
            return
        if time.monotonic() > deadline:
            raise AssertionError("members %r, want %r" % (got, want))
        time.sleep(0.05)


def client(base_url):
    return openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0, timeout=120.0)


def ask(base_url, docs, salt, **kw):
    return client(base_url).chat.completions.create(
        model=MODEL, messages=seg_messages(docs, system="Answer from the documents."), temperature=0,
        max_tokens=8, extra_body={"cache_salt": salt}, **kw)


class RouterCluster(unittest.TestCase):
    """router + 2 instances + 2 workers (all joined at run time) and a plain reference server."""

    @classmethod
    def setUpClass(cls):
        cls.router = start_router(cls)
        cls.inst = [start_instance(cls, cls.router) for _ in range(2)]
        cls.workers = [start_worker(cls, cls.router) for _ in range(2)]
        cls.plain = HypicServer().start()
        cls.addClassCleanup(cls.plain.cleanup)
        wait_members(cls.router, {**{p.address: "instance" for p in cls.inst}, **{w.address: "worker" for w in cls.workers}})

    def test_members_run_as_configured(self):
        mark = "(TLS) (cluster token required)"
        for p in [self.router] + self.inst + self.workers:
            self.assertEqual(mark in p.log(), SECURE, p.log())

    def test_cold_and_warm_match_a_single_instance(self):
        docs = DOCS[:4]
        want = ask(self.plain.base, docs, "s1").choices[0].message.content
        cold = ask(self.router.base, docs, "s1")
        warm = ask(self.router.base, docs, "s1")
        self.assertEqual(cold.choices[0].message.content, want)
        self.assertEqual(warm.choices[0].message.content, want)
        hc, hw = hypic_usage(cold.usage), hypic_usage(warm.usage)
        self.assertIn(hc["instance"], [p.address for p in self.inst])
        self.assertEqual(hw["instance"], hc["instance"], "the warm request follows its segments")
        self.assertGreaterEqual(hc["scatter"]["built_remote"], 1, hc)  # the joined workers built some
        self.assertEqual(hw["segments_hit"], 4)
        self.assertEqual(hw["scatter"]["built_remote"] + hw["scatter"]["built_local"], 0)
        # Cold: every segment was built for this request (composed as its layers arrived), none reused.
        self.assertEqual(hc["segments_missed"], 4, hc)
        self.assertEqual(cold.usage.prompt_tokens_details.cached_tokens, 0)
        self.assertGreater(warm.usage.prompt_tokens_details.cached_tokens, 0)

    def test_logprobs_through_the_router(self):
        msgs = [{"role": "user", "content": "Name a river."}]
        kw = dict(model=MODEL, messages=msgs, max_tokens=4, temperature=0, logprobs=True, top_logprobs=2)
        want = client(self.plain.base).chat.completions.create(**kw).choices[0].logprobs
        got = client(self.router.base).chat.completions.create(**kw).choices[0].logprobs
        self.assertEqual([e.token for e in got.content], [e.token for e in want.content])
        streamed = []
        with client(self.router.base).chat.completions.create(stream=True, **kw) as s:
            for ch in s:
                if ch.choices and ch.choices[0].logprobs is not None:
                    streamed.extend(ch.choices[0].logprobs.content)
        self.assertEqual([e.token for e in streamed], [e.token for e in want.content])
        for a, b in zip(got.content, want.content):
            self.assertAlmostEqual(a.logprob, b.logprob, places=4)
            self.assertEqual([t.token for t in a.top_logprobs], [t.token for t in b.top_logprobs])

    def test_tool_calls_through_the_router(self):
        import test_tools
        kw = dict(model=MODEL, messages=test_tools.ASK, tools=test_tools.TOOLS, tool_choice="required",
                  max_tokens=300, temperature=0)
        want = client(self.plain.base).chat.completions.create(**kw).choices[0]
        got = client(self.router.base).chat.completions.create(**kw).choices[0]
        self.assertEqual(got.finish_reason, "tool_calls")
        self.assertIsNone(got.message.content)
        self.assertEqual([(t.function.name, t.function.arguments) for t in got.message.tool_calls],
                         [(t.function.name, t.function.arguments) for t in want.message.tool_calls])
        content, calls, finish = test_tools.assemble(client(self.router.base).chat.completions.create(stream=True, **kw))
        self.assertEqual((content, finish), ("", "tool_calls"))
        self.assertEqual([(c["name"], c["arguments"]) for c in calls],
                         [(t.function.name, t.function.arguments) for t in want.message.tool_calls])

    def test_choices_through_the_router(self):
        import test_choices
        kw = dict(model=MODEL, messages=test_choices.ASK, n=3, max_tokens=5, temperature=1.0, seed=9)
        want = client(self.plain.base).chat.completions.create(**kw)
        got = client(self.router.base).chat.completions.create(**kw)
        self.assertEqual([c.message.content for c in got.choices], [c.message.content for c in want.choices])
        self.assertEqual(got.usage.completion_tokens, want.usage.completion_tokens)
        texts, finish = test_choices.streamed_choices(client(self.router.base).chat.completions.create(stream=True, **kw))
        self.assertEqual(texts, [c.message.content for c in want.choices])
        self.assertEqual(finish, [c.finish_reason for c in want.choices])

    def test_messages_through_the_router(self):
        try:
            import anthropic
        except ImportError:
            self.skipTest("the anthropic package is not installed (scripts/install.sh)")
        kw = dict(model=MODEL, max_tokens=6, extra_body={"temperature": 0},
                  messages=[{"role": "user", "content": [
                      {"type": "text", "text": DOCS[0], "cache_control": {"type": "ephemeral"}},
                      {"type": "text", "text": "Summarise."}]}])
        want = anthropic.Anthropic(base_url=self.plain.base, api_key="unused", max_retries=0).messages.create(**kw)
        via = anthropic.Anthropic(base_url=self.router.base, api_key="unused", max_retries=0)
        got = via.messages.create(**kw)
        self.assertEqual(got.type, "message")
        self.assertEqual(got.content[0].text, want.content[0].text)
        self.assertEqual(got.stop_reason, want.stop_reason)
        with via.messages.stream(**kw) as stream:
            final = stream.get_final_message()
        self.assertEqual(final.content[0].text, want.content[0].text)
        with self.assertRaises(anthropic.BadRequestError) as e:  # errors in Anthropic's shape
            via.messages.create(model=MODEL, max_tokens=4, messages=[{"role": "assistant", "content": "x"}])
        self.assertEqual(e.exception.body["type"], "error")

    def test_streaming_through_the_router(self):
        docs = DOCS[1:3]
        want = ask(self.plain.base, docs, "s2").choices[0].message.content
        with ask(self.router.base, docs, "s2", stream=True, stream_options={"include_usage": True}) as s:
            text, finish, usage, n = stream_text(s)
        self.assertEqual(text, want)
        self.assertEqual(finish, "length")
        self.assertEqual(usage.completion_tokens, 8)
        self.assertGreater(n, 2)

    def test_completions_through_the_router(self):
        want = client(self.plain.base).completions.create(model=MODEL, prompt="Once upon a time", max_tokens=6, temperature=0)
        got = client(self.router.base).completions.create(model=MODEL, prompt="Once upon a time", max_tokens=6, temperature=0)
        self.assertEqual(got.choices[0].text, want.choices[0].text)

    def test_tokenize_detokenize_and_props_through_the_router(self):
        for body in ({"content": DOCS[0]}, {"prompt": DOCS[1], "with_pieces": True},
                     {"model": MODEL, "messages": [{"role": "user", "content": "Name a river."}]}):
            want = http_json("POST", self.plain.base + "/tokenize", body)
            self.assertEqual(want[0], 200, want)
            self.assertEqual(http_json("POST", self.router.base + "/tokenize", body), want)
        ids = http_json("POST", self.plain.base + "/tokenize", {"content": DOCS[0]})[1]["tokens"]
        status, out = http_json("POST", self.router.base + "/detokenize", {"tokens": ids})
        self.assertEqual((status, out["content"]), (200, DOCS[0]))
        status, out = http_json("POST", self.router.base + "/detokenize", {"tokens": [1 << 30]})
        self.assertEqual((status, out["error"]["param"]), (400, "tokens[0]"), out)  # the instance's error, relayed
        status, body = http_get(self.router.base + "/props")
        self.assertEqual(status, 200, body)
        props = json.loads(body)
        self.assertEqual(props["model"], MODEL)
        self.assertIn(props["router"]["instance"], [p.address for p in self.inst])
        self.assertFalse(props["api_key_required"])

    def test_documents_are_spread_over_instances_and_each_stays_at_its_home(self):
        docs = ["Note %d: the ferry to island %d leaves at %d o'clock from pier %d." % (i, i, i % 12 + 1, i) * 6
                for i in range(16)]
        first = [hypic_usage(ask(self.router.base, [d], "s3").usage)["instance"] for d in docs]
        # 16 documents over 2 instances by rendezvous hashing: all on one has probability 2^-15.
        self.assertEqual(len(set(first)), 2, first)
        for d, inst in zip(docs, first):
            u = ask(self.router.base, [d], "s3").usage
            self.assertEqual(hypic_usage(u)["instance"], inst)
            self.assertEqual(hypic_usage(u)["segments_hit"], 1)

    def test_errors(self):
        c = client(self.router.base)
        with self.assertRaises(openai.NotFoundError):
            c.chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
        with self.assertRaises(openai.BadRequestError) as e:
            c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": [
                {"type": "segment", "segment_id": "seg_x"}, {"type": "text", "text": "q"}]}], max_tokens=2)
        self.assertIn("per instance", str(e.exception))
        with self.assertRaises(openai.BadRequestError):  # validated by the instance, answered through the router
            c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=-3)
        # A body over gRPC's default 4 MiB message limit reaches the instance (its answer: too long).
        with self.assertRaises(openai.BadRequestError) as e:
            c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "word " * (1 << 20)}], max_tokens=2)
        self.assertIn("context", str(e.exception))
        status, body = http_json("POST", self.router.base + "/v1/segments", {"text": "x"})
        self.assertEqual(status, 400)
        self.assertEqual(body["error"]["code"], "unsupported_via_router")
        status, _ = http_json("POST", self.router.base + "/v1/chat/completions", None)
        self.assertEqual(status, 400)
        status, body = http_get(self.router.base + "/metrics")
        self.assertEqual(status, 200)
        self.assertIn('hypic_router_requests_total{status="400"}', body)


class RouterReasoning(unittest.TestCase):
    """An instance with --reasoning on behind the router: reasoning_content and content as the
    instance answers them directly, whole and streamed."""

    @classmethod
    def setUpClass(cls):
        cls.router = start_router(cls)
        cls.inst = start_instance(cls, cls.router, "--reasoning", "on")
        cls.plain = HypicServer("--reasoning", "on").start()
        cls.addClassCleanup(cls.plain.cleanup)
        wait_members(cls.router, {cls.inst.address: "instance"})

    def test_reasoning_through_the_router(self):
        kw = dict(model=MODEL, messages=[{"role": "user", "content": "Why?"}], max_tokens=12, temperature=0)
        want = client(self.plain.base).chat.completions.create(**kw).choices[0].message
        got = client(self.router.base).chat.completions.create(**kw).choices[0].message
        reasoning = (want.model_extra or {}).get("reasoning_content")
        self.assertTrue(reasoning)
        self.assertEqual(((got.model_extra or {}).get("reasoning_content"), got.content), (reasoning, want.content))
        streamed, content = "", ""
        for ch in client(self.router.base).chat.completions.create(stream=True, **kw):
            if ch.choices:
                streamed += (ch.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
                content += ch.choices[0].delta.content or ""
        self.assertEqual((streamed, content), (reasoning, want.content))


class Faults(unittest.TestCase):
    def test_worker_killed_mid_request_still_completes_correctly(self):
        router = start_router(self)
        inst = start_instance(self, router)
        slow = [start_worker(self, router, "--debug-delay-ms", "1500") for _ in range(2)]
        wait_members(router, {inst.address: "instance", slow[0].address: "worker", slow[1].address: "worker"})
        plain = HypicServer().start()
        self.addCleanup(plain.cleanup)
        docs = DOCS[:6]
        want = ask(plain.base, docs, "f1").choices[0].message.content
        out = {}
        th = threading.Thread(target=lambda: out.update(r=ask(router.base, docs, "f1")))
        th.start()
        wait_log(slow[0], "--debug-delay-ms: holding")  # it holds a build: kill it mid-request
        slow[0].signal(signal.SIGKILL)
        th.join(timeout=120)
        self.assertFalse(th.is_alive())
        self.assertEqual(out["r"].choices[0].message.content, want)
        sc = hypic_usage(out["r"].usage)["scatter"]
        self.assertGreaterEqual(sc["rescheduled"], 1, sc)

    def test_instance_killed_between_requests_fails_over(self):
        router = start_router(self)
        a, b = start_instance(self, router), start_instance(self, router)
        wait_members(router, {a.address: "instance", b.address: "instance"})
        plain = HypicServer().start()
        self.addCleanup(plain.cleanup)
        want = ask(plain.base, DOCS[:2], "f2").choices[0].message.content
        first = hypic_usage(ask(router.base, DOCS[:2], "f2").usage)["instance"]
        victim = a if first == a.address else b
        victim.signal(signal.SIGKILL)  # no Leave: the router finds out when it forwards
        r = ask(router.base, DOCS[:2], "f2")
        self.assertEqual(r.choices[0].message.content, want)
        self.assertNotEqual(hypic_usage(r.usage)["instance"], first)

    def test_a_full_instance_answers_429_and_the_router_tries_another(self):
        router = start_router(self)
        # Each piece takes 50 ms: the hog below holds its slot for seconds, not for the few ms
        # its ~300 tokens would take.
        a, b = (start_instance(self, router, "--max-concurrency", "1", "--max-queue", "0", "--debug-piece-delay-ms", "50")
                for _ in range(2))
        wait_members(router, {a.address: "instance", b.address: "instance"})
        first = hypic_usage(ask(router.base, DOCS[:2], "f4").usage)["instance"]
        full = a if first == a.address else b
        # A client talking to that instance directly takes its only slot.
        direct = re.search(r"on http://127\.0\.0\.1:(\d+)", full.log()).group(1)
        started, done = threading.Event(), threading.Event()

        def hog():
            with client("http://127.0.0.1:" + direct).chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": "A long story."}], max_tokens=2000,
                    temperature=0, stream=True) as s:
                for _ in s:
                    started.set()
                    if done.is_set():
                        break
        th = threading.Thread(target=hog)
        th.start()
        try:
            self.assertTrue(started.wait(30))
            r = ask(router.base, DOCS[:2], "f4")  # affinity says `full`, which answers 429
            self.assertNotEqual(hypic_usage(r.usage)["instance"], full.address)
            self.assertIn('"status":429', full.log(), "the affinity choice was tried first")
            self.assertIn('"event":"forward.busy"', router.log())
        finally:
            done.set()
            th.join(60)

    def stopped(self, proc):
        """SIGSTOPs `proc` (it keeps its sockets and answers nothing) until the test ends."""
        proc.signal(signal.SIGSTOP)
        self.addCleanup(proc.signal, signal.SIGCONT)

    def slow_prober_router(self):
        # Probes would find a stopped instance out within 0.4 s and route around it; with them
        # rare, the request reaches it and the deadlines are what is tested.
        return start_router(self, "--probe-interval-ms", "60000", "--first-byte-timeout", "1", "--idle-timeout", "1")

    def test_a_stopped_instance_is_cut_at_the_deadline_and_the_request_retried(self):
        router = self.slow_prober_router()
        a, b = start_instance(self, router), start_instance(self, router)
        wait_members(router, {a.address: "instance", b.address: "instance"})
        r1 = ask(router.base, DOCS[:2], "f5")
        home = hypic_usage(r1.usage)["instance"]
        self.stopped(a if home == a.address else b)
        t0 = time.monotonic()
        r2 = ask(router.base, DOCS[:2], "f5")  # affinity sends it home, which says nothing
        self.assertLess(time.monotonic() - t0, 60)
        self.assertNotEqual(hypic_usage(r2.usage)["instance"], home)
        self.assertEqual(r2.choices[0].message.content, r1.choices[0].message.content)
        self.assertIn('"event":"forward.timeout"', router.log())

    def test_an_instance_killed_mid_request_is_retried_when_its_client_has_nothing_yet(self):
        router = start_router(self)
        a, b = (start_instance(self, router, "--debug-piece-delay-ms", "300") for _ in range(2))
        wait_members(router, {a.address: "instance", b.address: "instance"})
        r1 = ask(router.base, DOCS[:2], "f7")
        home = hypic_usage(r1.usage)["instance"]
        victim = a if home == a.address else b
        out = {}
        th = threading.Thread(target=lambda: out.update(r=ask(router.base, DOCS[:2], "f7")))
        th.start()

        def inflight():
            _, body = http_get(router.base + "/metrics")
            return ('hypic_router_member_inflight{role="instance",address="%s"} 1' % home) in body
        deadline = time.monotonic() + 30
        while not inflight():  # the request is at its home, its pieces coming every 300 ms
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.02)
        victim.signal(signal.SIGKILL)
        th.join(120)
        self.assertIn("r", out, "the non-streaming request was not retried")
        self.assertNotEqual(hypic_usage(out["r"].usage)["instance"], home)
        self.assertEqual(out["r"].choices[0].message.content, r1.choices[0].message.content)

    def test_a_stopped_only_instance_is_a_504_not_a_hang(self):
        router = self.slow_prober_router()
        inst = start_instance(self, router)
        wait_members(router, {inst.address: "instance"})
        ask(router.base, DOCS[:1], "f6")
        self.stopped(inst)
        with self.assertRaises(openai.APIStatusError) as e:
            ask(router.base, DOCS[:1], "f6")
        self.assertEqual(e.exception.status_code, 504)
        self.assertEqual(e.exception.body["code"], "instance_timeout")
        self.assertIn("--first-byte-timeout", e.exception.body["message"])

    def test_a_stream_cut_after_its_first_byte_ends_with_the_error_event(self):
        router = self.slow_prober_router()
        inst = start_instance(self, router)
        wait_members(router, {inst.address: "instance"})
        got, err = [], None
        with client(router.base).chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "A long story."}], max_tokens=2000,
                temperature=0, stream=True) as st:
            try:
                for chunk in st:
                    if chunk.choices and chunk.choices[0].delta.content:
                        got.append(chunk)
                        if len(got) == 1:  # text has reached the client: no retry now
                            self.stopped(inst)
            except openai.APIError as e:
                err = e
        self.assertIsNotNone(err, "the stream ended without the error event")
        self.assertIn("--idle-timeout", str(err))
        self.assertIn('"event":"forward.timeout"', router.log())

    def test_sigterm_lets_the_forwarded_stream_finish_and_exits_0(self):
        router = start_router(self)
        inst = start_instance(self, router)
        wait_members(router, {inst.address: "instance"})
        msgs = [{"role": "user", "content": "A story, please."}]
        c = client(router.base)
        ref = c.chat.completions.create(model=MODEL, messages=msgs, temperature=0, max_tokens=200)
        th, started, out = base.stream_in_background(c, msgs, 200)
        self.assertTrue(started.wait(30))
        router.signal(signal.SIGTERM)
        th.join(60)
        c.close()
        self.assertNotIn("error", out, out.get("error"))
        self.assertEqual(out["result"], (ref.choices[0].message.content, ref.choices[0].finish_reason))
        self.assertEqual(router.stop(), 0, router.log())
        self.assertIn("hypic router: stopped", router.log())

    def test_members_join_and_leave_while_the_router_runs(self):
        router = start_router(self)
        status, body = http_get(router.base + "/health")
        self.assertEqual(status, 503, body)
        status, body = http_get(router.base + "/version")  # answered with no member too
        self.assertEqual(status, 200, body)
        self.assertRegex(json.loads(body)["version"], r"^\d+\.\d+\.\d+$")
        status, body = http_json("POST", router.base + "/tokenize", {"content": "x"})
        self.assertEqual((status, body["error"]["code"]), (503, "no_instance"), body)
        with self.assertRaises(openai.APIStatusError) as e:
            ask(router.base, DOCS[:1], "f3")
        self.assertEqual(e.exception.status_code, 503)
        inst = start_instance(self, router)
        wait_members(router, {inst.address: "instance"})
        w = start_worker(self, router)
        wait_members(router, {inst.address: "instance", w.address: "worker"})
        self.assertGreaterEqual(hypic_usage(ask(router.base, DOCS[3:5], "f3").usage)["scatter"]["built_remote"], 1)
        self.assertEqual(w.stop(), 0)  # SIGTERM: Leave, then exit
        self.assertEqual(len([m for m in cluster(router)["members"] if m["role"] == "worker"]), 0)
        u = hypic_usage(ask(router.base, DOCS[5:7], "f3").usage)
        self.assertNotIn("scatter", u, "a worker that left is not tried (and no other is left)")
        self.assertEqual(inst.stop(), 0)
        self.assertEqual(cluster(router)["members"], [])


def wait_log(proc, text, timeout=30):
    """Waits until `text` is in the process's log (a condition, not a sleep)."""
    deadline = time.monotonic() + timeout
    while text not in proc.log():
        if time.monotonic() > deadline:
            raise AssertionError("%r not in the %s log:\n%s" % (text, proc.args[1], proc.log()))
        time.sleep(0.05)


class ClusterAuth(unittest.TestCase):
    """Members that do not hold the cluster's token, or that speak plaintext to a TLS cluster, are
    refused (logged on both sides), while the right ones join and serve."""

    def test_a_wrong_or_missing_token_is_refused(self):
        router = start_router(self, "--cluster-token", "right", secure=False)
        wrong = start_worker(self, router, "--cluster-token", "wrong", secure=False)
        missing = start_worker(self, router, secure=False)
        for w in (wrong, missing):
            wait_log(w, "retrying every second")  # its Join was refused
        wait_log(router, "refused Router.Join")
        self.assertNotIn("right", router.log())  # the token is never logged
        good = start_worker(self, router, "--cluster-token", "right", secure=False)
        inst = start_instance(self, router, "--cluster-token", "right", secure=False)
        wait_members(router, {good.address: "worker", inst.address: "instance"})
        r = ask(router.base, DOCS[6:8], "auth-1")
        self.assertGreaterEqual(hypic_usage(r.usage)["scatter"]["built_remote"], 1)
        self.assertEqual(http_json("POST", router.base + "/tokenize", {"content": "x"})[0], 200)  # Query carries the token
        self.assertNotIn(wrong.address, [m["address"] for m in cluster(router)["members"]])

    def test_plaintext_is_refused_by_a_tls_cluster(self):
        router = start_router(self, "--cluster-token", "right", *tls_args(), secure=False)
        plain = start_worker(self, router, "--cluster-token", "right", secure=False)
        stranger = start_worker(self, router, "--cluster-token", "right", *tls_args("rogue", "rogue-ca"), secure=False)
        for w in (plain, stranger):
            wait_log(w, "retrying every second")
        inst = start_instance(self, router, "--cluster-token", "right", *tls_args(), secure=False)
        wait_members(router, {inst.address: "instance"})
        r = ask(router.base, DOCS[:1], "auth-2")
        self.assertEqual(r.choices[0].finish_reason in ("stop", "length"), True)
        self.assertEqual(len(cluster(router)["members"]), 1)


if __name__ == "__main__":
    unittest.main(argv=base.UNITTEST_ARGV, verbosity=2)
