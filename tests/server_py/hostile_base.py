"""Shared by the hostile-input suite (test_hostile.py): its flags, constants, the server
and router processes it starts, and HostileCase (a server per test class)."""
import os
import re
import sys
import unittest


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import raw_http  # noqa: E402
from raw_http import Conn  # noqa: E402
from server_proc import Process, parse_own_args as _parse_own_args  # noqa: E402

OPTS, UNITTEST_ARGV = _parse_own_args(sys.argv)


MODEL_DIR = os.path.join(OPTS["source_dir"], "tests", "models", "qwen3_5_dense")
MODEL = "qwen3_5_dense"
KEY = "hostile-key-7"
# A greedy prompt that this model (random weights) answers at length: ~2900 tokens before
# its end-of-text, several seconds of decoding, so a stream of it is still running when a
# test cuts it short (most prompts end after a few hundred tokens).
LONG_PROMPT = [{"role": "user", "content": "ok"}]
SHORT_PROMPT = [{"role": "user", "content": "hi"}]
ERROR_KEYS = {"message", "type", "param", "code"}

_PORT_RE = re.compile(r"hypic serve: model '([^']*)' on http://([0-9.]+):(\d+)")
_ROUTER_PORT_RE = re.compile(r"hypic router: http://[0-9.]+:(\d+)")


def fetch(port, method, path, key=KEY, **kw):
    """raw_http.fetch with this suite's key unless told otherwise."""
    return raw_http.fetch(port, method, path, key=key, **kw)


def assert_anthropic_error(test, r, status, etype, ctx=""):
    ctx = "%r %s" % (r, ctx)
    test.assertIsNotNone(r, "no response (connection closed)" + ctx)
    test.assertEqual(r.status, status, ctx)
    test.assertTrue((r.header("Content-Type") or "").startswith("application/json"), ctx)
    body = r.json()
    test.assertEqual((set(body), body["type"], set(body["error"])), ({"type", "error"}, "error", {"type", "message"}), ctx)
    test.assertEqual(body["error"]["type"], etype, ctx)
    test.assertTrue(body["error"]["message"], ctx)
    return body["error"]


def chat_body(messages=SHORT_PROMPT, max_tokens=2, **extra):
    b = {"model": MODEL, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
    b.update(extra)
    return b


# ---- the server process ----

class HypicServer(Process):
    """One `hypic serve --api-key KEY` process. The readiness probe connects from
    `probe_src`, so that a test of the per-address cap starts with no connection of
    127.0.0.1 counted."""

    def __init__(self, *extra_args, probe_src="127.0.0.3", env=None):
        super().__init__([OPTS["hypic_bin"], "serve", "--model", MODEL_DIR, "--port", "0", "--dtype", "f32",
                          "--cache-mem", "64", "--api-key", KEY] + list(extra_args), prefix="hypic-hostile-",
                         env=env)
        self.probe_src = probe_src

    def start(self, timeout=30.0):
        def ready():
            r = fetch(self.port, "GET", "/health", key=None, src=self.probe_src, timeout=2)
            return r is not None and r.status == 200
        return self.spawn(_PORT_RE, 3, timeout, ready)

    def stop(self, timeout=15.0):
        return super().stop(timeout)


def start_router(test, *extra_args, ready=None):
    """`hypic router --api-key KEY` on a free port, stopped by the test's cleanup; ready(r)
    (if given) says when it may be used."""
    r = Process([OPTS["hypic_bin"], "router", "--port", "0", "--api-key", KEY] + list(extra_args),
                prefix="hypic-hostile-router-")
    test.addCleanup(r.cleanup)
    return r.spawn(_ROUTER_PORT_RE, 1, 30.0, (lambda: ready(r)) if ready else None)


def metrics_value(port, name, src="127.0.0.3"):
    r = fetch(port, "GET", "/metrics", src=src)
    if r is None or r.status != 200:
        return None
    for line in r.body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


class HostileCase(unittest.TestCase):
    """A server per class (started in setUpClass; a class cleanup stops it)."""
    SERVER_ARGS = ("--max-body", "1")
    SERVER_ENV = {}

    @classmethod
    def setUpClass(cls):
        cls.server = HypicServer(*cls.SERVER_ARGS, env=cls.SERVER_ENV)
        cls.addClassCleanup(cls.server.cleanup)
        cls.server.start()
        cls.port = cls.server.port

    def log_tail(self, n=15):
        return "\n--- server log (tail) ---\n" + "\n".join(self.server.log().splitlines()[-n:])

    def fetch(self, method, path, **kw):
        return fetch(self.port, method, path, **kw)

    def conn(self, **kw):
        return Conn(self.port, **kw)

    def assertError(self, r, status, code=None, param=Ellipsis, msg=None):
        """r is an OpenAI error response: the status, {"error": {message, type, param, code}}."""
        ctx = "%r%s%s" % (r, " " + msg if msg else "", self.log_tail())
        self.assertIsNotNone(r, "no response (connection closed)" + ctx)
        self.assertEqual(r.status, status, ctx)
        self.assertTrue((r.header("Content-Type") or "").startswith("application/json"), ctx)
        body = r.json()
        self.assertEqual(set(body), {"error"}, ctx)
        err = body["error"]
        self.assertEqual(set(err), ERROR_KEYS, ctx)
        self.assertIsInstance(err["message"], str, ctx)
        self.assertTrue(err["message"], ctx)
        self.assertEqual(err["type"], "server_error" if status >= 500 else "invalid_request_error", ctx)
        if code is not None:
            self.assertEqual(err["code"], code, ctx)
        if param is not Ellipsis:
            self.assertEqual(err["param"], param, ctx)
        return err

    def assertAnthropicError(self, r, status, etype, msg=None):
        """r is an Anthropic error response: the status, {"type": "error", "error": {type, message}}."""
        assert_anthropic_error(self, r, status, etype, msg + self.log_tail() if msg else self.log_tail())

    def assertAnswersThenCloses(self, c, status, code=None, timeout=10.0):
        """The next response on c is the error, and the connection is closed after it."""
        r = c.read_response(timeout)
        self.assertError(r, status, code)
        self.assertTrue(r.closes(), r)
        self.assertTrue(c.wait_closed(timeout), "connection still open %.0f s after %r" % (timeout, r))
        return r

    def segment_ids(self):
        r = self.fetch("GET", "/v1/segments", src="127.0.0.3")
        self.assertEqual(r.status, 200, r)
        return sorted(s["id"] for s in r.json()["data"])

    def assertServes(self, src=None, segments=()):
        """The server is alive, answers a normal request on a fresh connection, and its
        registered segments are those expected (nothing was changed)."""
        self.assertIsNone(self.server.proc.poll(), "the server exited" + self.log_tail())
        r = self.fetch("GET", "/health", key=None, src=src)
        self.assertIsNotNone(r, "GET /health: connection closed" + self.log_tail())
        self.assertEqual((r.status, r.json()), (200, {"status": "ok"}), r)
        r = self.fetch("GET", "/v1/models", src=src)
        self.assertIsNotNone(r, "GET /v1/models: connection closed" + self.log_tail())
        self.assertEqual(r.status, 200, r)
        self.assertEqual([m["id"] for m in r.json()["data"]], [MODEL])
        self.assertEqual(self.segment_ids(), sorted(segments))

    def chat(self, src=None, **kw):
        r = self.fetch("POST", "/v1/chat/completions", body=chat_body(**kw), src=src, timeout=60)
        self.assertIsNotNone(r, "chat: connection closed" + self.log_tail())
        self.assertEqual(r.status, 200, repr(r) + self.log_tail())
        self.assertEqual(r.json()["object"], "chat.completion")
        return r.json()
