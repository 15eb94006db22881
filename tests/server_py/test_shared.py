#!/usr/bin/env python3
"""The shared segment tier and registry (`--segment-store redis://…`): two instances and a
router sharing one redis-server (Debian's, started here on a free loopback port), driven by
the official `openai` client.

A document built on instance A is a hit on B (no rebuild; counted in /metrics); a segment id
registered through A answers through B and the router, and a DELETE through B ends it on A;
values damaged in Redis are detected and rebuilt with the same answer; Redis killed mid-run:
requests still answer with the same text and registrations get a clear 503; Redis restarted
(empty): the tier is used again.

    python tests/server_py/test_shared.py --hypic-bin build/hypic [--source-dir .]
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_openai_client as base  # noqa: E402 - parses --hypic-bin / --source-dir, SKIPs without openai
from test_openai_client import MODEL, HypicServer, http_json, hypic_usage, metrics_value, seg_messages  # noqa: E402
from test_router import start_router  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resp(port, *args):
    """One Redis command over RESP (enough of it for the tests): the decoded reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        s.sendall(out)
        with s.makefile("rb") as f:
            return _read_reply(f)


def _read_reply(f):
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind in (b"+", b"-"):
        return rest.decode()
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        return [_read_reply(f) for _ in range(int(rest))]
    raise AssertionError("bad reply %r" % line)



class Redis:
    """redis-server on a free loopback port, no persistence; kill() and start() again keep the port."""

    def __init__(self, *extra):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="hypic-redis-")
        self.proc = None
        self.extra = list(extra)  # more redis-server options

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def start(self, timeout=60):
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server not found: run scripts/install.sh")
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", self.dir] + self.extra, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if resp(self.port, "PING") == "PONG":
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("redis-server exited with %d" % self.proc.returncode)
            time.sleep(0.05)
        raise RuntimeError("redis-server did not answer within %ds" % timeout)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def cleanup(self):
        self.kill()
        shutil.rmtree(self.dir, True)


def doc(tag, i):
    return ("Shared document %s-%d. The archive of station %d lists its instruments: a barometer, a "
            "%s anemometer and %d rain gauges checked every %d hours." % (tag, i, i, ["cup", "sonic", "vane"][i % 3],
                                                                          2 + i % 5, 1 + i % 6))


def wait_until(f, what, timeout=60):
    """Polls f() every 50 ms (write-backs are asynchronous; this waits for them, never races)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = f()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def metric(server, name):
    return metrics_value(server.base, name) or 0.0


class SharedTier(unittest.TestCase):
    """redis-server, a router and instances A and B, all on --segment-store."""

    def setUp(self):
        self.redis = Redis()
        self.addCleanup(self.redis.cleanup)
        self.redis.start()
        self.router = start_router(self, "--segment-store", self.redis.url, secure=False)
        self.a = self.instance()
        self.b = self.instance()

    def instance(self):
        s = HypicServer("--segment-store", self.redis.url, "--grpc-port", "0", "--join", self.router.join)
        self.addCleanup(s.cleanup)
        s.start()
        return s

    def ask(self, server_or_base, docs, salt, question="Which instruments?"):
        base_url = getattr(server_or_base, "base", server_or_base)
        c = base.openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0, timeout=120.0)
        r = c.chat.completions.create(model=MODEL, messages=seg_messages(docs, question), temperature=0, max_tokens=6,
                                      extra_body={"cache_salt": salt})
        return r.choices[0].message.content, hypic_usage(r.usage)

    def ask_id(self, base_url, sid, salt):
        c = base.openai.OpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0, timeout=120.0)
        msgs = [{"role": "user", "content": [{"type": "segment", "segment_id": sid},
                                             {"type": "text", "text": "Which instruments?"}]}]
        r = c.chat.completions.create(model=MODEL, messages=msgs, temperature=0, max_tokens=6,
                                      extra_body={"cache_salt": salt})
        return r.choices[0].message.content

    def written(self, server, n):
        """Waits until `server` has written n entries to the shared tier in all."""
        wait_until(lambda: metric(server, "hypic_segment_store_puts_total") >= n, "%d shared-tier writes" % n)

    def test_a_document_built_on_a_is_a_hit_on_b(self):
        docs = [doc("x", 1), doc("x", 2)]
        text_a, ha = self.ask(self.a, docs, "tenant")
        self.assertEqual((ha["segments_hit"], ha["segments_missed"]), (0, 2), ha)
        self.written(self.a, 2)
        text_b, hb = self.ask(self.b, docs, "tenant")
        self.assertEqual(text_b, text_a)
        self.assertEqual((hb["segments_hit"], hb["segments_missed"]), (2, 0), hb)
        self.assertEqual(metric(self.b, "hypic_segment_store_hits_total"), 2)
        self.assertEqual(metric(self.b, "hypic_segment_store_up"), 1)
        # Another tenant's key differs: built, never the first tenant's value.
        _, hc = self.ask(self.b, docs, "other-tenant")
        self.assertEqual(hc["segments_missed"], 2, hc)

    def test_a_segment_id_registered_through_a_answers_everywhere_until_deleted(self):
        st, reg = http_json("POST", self.a.base + "/v1/segments", {"text": doc("r", 3), "cache_salt": "t"})
        self.assertEqual(st, 200, reg)
        sid = reg["id"]
        ref = self.ask_id(self.a.base, sid, "t")
        for where in (self.b.base, self.router.base):
            self.assertEqual(self.ask_id(where, sid, "t"), ref, where)
        st, got = http_json("GET", self.b.base + "/v1/segments/%s?cache_salt=t" % sid)
        self.assertEqual((st, got["id"]), (200, sid))
        st, lst = http_json("GET", self.b.base + "/v1/segments?cache_salt=t")
        self.assertEqual([x["id"] for x in lst["data"]], [sid])
        self.assertEqual(http_json("GET", self.b.base + "/v1/segments/%s?cache_salt=u" % sid)[0], 404)
        # Deleted through B: gone on A, on B and at the router.
        st, _ = http_json("DELETE", self.b.base + "/v1/segments/%s?cache_salt=t" % sid)
        self.assertEqual(st, 200)
        for where in (self.a.base, self.b.base):
            self.assertEqual(http_json("GET", where + "/v1/segments/%s?cache_salt=t" % sid)[0], 404, where)
        with self.assertRaises(base.openai.NotFoundError) as e:
            self.ask_id(self.router.base, sid, "t")
        self.assertIn(sid, str(e.exception))
        with self.assertRaises(base.openai.NotFoundError):
            self.ask_id(self.a.base, sid, "t")

    def test_damaged_values_are_rebuilt_with_the_same_answer(self):
        docs = [doc("c", 4)]
        ref, _ = self.ask(self.a, docs, "tc")
        self.written(self.a, 1)
        keys = [k.decode() for k in resp(self.redis.port, "KEYS", "hypic:e:*:0")]
        self.assertGreaterEqual(len(keys), 1)
        for k in keys:
            self.assertEqual(resp(self.redis.port, "SETRANGE", k, 64, b"\xff\x00garbage"), len(resp(self.redis.port, "GET", k)))
        text, h = self.ask(self.b, docs, "tc")
        self.assertEqual(text, ref)
        self.assertEqual(h["segments_missed"], 1, h)
        self.assertGreaterEqual(metric(self.b, "hypic_segment_store_corrupt_total"), 1)
        # B's rebuild wrote it back: a third look-up elsewhere is a verified hit.
        self.written(self.b, 1)
        _, h2 = self.ask(self.a.base, docs, "tc")
        self.assertEqual(h2["segments_hit"], 1, h2)

    def test_redis_killed_then_restarted(self):
        docs = [doc("k", 5)]
        ref, _ = self.ask(self.a, docs, "tk")
        self.redis.kill()
        text, h = self.ask(self.b, docs, "tk")  # no shared tier: built locally, same answer
        self.assertEqual(text, ref)
        self.assertEqual(h["segments_missed"], 1, h)
        st, err = http_json("POST", self.b.base + "/v1/segments", {"text": doc("k", 6)})
        self.assertEqual(st, 503, err)
        self.assertEqual(err["error"]["code"], "registry_unavailable")
        self.assertGreaterEqual(metric(self.b, "hypic_segment_store_errors_total"), 1)
        st, err = http_json("GET", self.b.base + "/v1/segments/seg_00000000000000000000000000000000")
        self.assertEqual((st, err["error"]["code"]), (503, "registry_unavailable"))  # not "unknown": nobody can tell
        self.redis.start()  # empty, same port
        for s in (self.a, self.b):
            wait_until(lambda: metric(s, "hypic_segment_store_up") == 1, "the client's backoff to pass")
        more = [doc("k", 7)]
        puts = metric(self.a, "hypic_segment_store_puts_total")
        ref2, _ = self.ask(self.a, more, "tk")
        self.written(self.a, puts + 1)
        text2, h2 = self.ask(self.b, more, "tk")
        self.assertEqual(text2, ref2)
        self.assertEqual(h2["segments_hit"], 1, h2)
        st, reg = http_json("POST", self.b.base + "/v1/segments", {"text": doc("k", 8)})
        self.assertEqual(st, 200, reg)

    def test_redis_restarted_empty_gets_every_acknowledged_registration_back(self):
        ids = []  # (id, tenant, the instance it was registered through)
        for i in range(6):
            s = (self.a, self.b)[i % 2]
            st, reg = http_json("POST", s.base + "/v1/segments", {"text": doc("r", i), "cache_salt": "t%d" % (i % 3)})
            self.assertEqual(st, 200, reg)
            ids.append((reg["id"], "t%d" % (i % 3), s))
        refs = {sid: self.ask_id(self.b.base, sid, t) for sid, t, _ in ids[:2]}
        self.redis.kill()
        self.redis.start()  # no persistence: it forgot every record
        self.assertIsNone(resp(self.redis.port, "GET", "hypic:r:" + ids[0][0]))
        for s in (self.a, self.b):
            wait_until(lambda: metric(s, "hypic_segment_registry_forgot_total") >= 1, "the instance to notice")
        wait_until(lambda: sum(metric(s, "hypic_segment_registry_republished_total") for s in (self.a, self.b))
                   == len(ids), "the re-publication")
        for sid, tenant, _ in ids:
            self.assertIsNotNone(resp(self.redis.port, "GET", "hypic:r:" + sid), sid)
            for s in (self.a, self.b):  # every instance, not just the one that holds it
                st, got = http_json("GET", s.base + "/v1/segments/%s?cache_salt=%s" % (sid, tenant))
                self.assertEqual(st, 200, (sid, got))
            st, _ = http_json("GET", self.b.base + "/v1/segments/%s?cache_salt=other" % sid)
            self.assertEqual(st, 404)  # still the tenant's alone
        for sid, t, _ in ids[:2]:  # the same answers, through the other instance
            self.assertEqual(self.ask_id(self.a.base, sid, t), refs[sid])
        log = self.a.log() + self.b.log()
        self.assertIn("forgot every registration", log)
        # A DELETE after the re-publication still ends the id everywhere.
        sid, tenant, _ = ids[0]
        st, _ = http_json("DELETE", self.b.base + "/v1/segments/%s?cache_salt=%s" % (sid, tenant))
        self.assertEqual(st, 200)
        for s in (self.a, self.b):
            st, _ = http_json("GET", s.base + "/v1/segments/%s?cache_salt=%s" % (sid, tenant))
            self.assertEqual(st, 404)


if __name__ == "__main__":
    unittest.main(argv=base.UNITTEST_ARGV, verbosity=2)
