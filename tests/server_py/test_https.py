#!/usr/bin/env python3
"""`hypic serve` over HTTPS (--https-cert / --https-key / --https-client-ca), certificates made
in the run by tests/common/make_certs.sh (a CA, a server certificate for 127.0.0.1 signed by
it, a client of another CA):

* the official `openai` client against https:// trusting the test CA: a chat answer and a
  stream, the same text as over plain HTTP from a server on the same model;
* plain HTTP sent to the HTTPS port: a plain 400 that says to use https, then closed;
* the hostile suite's guarantees inside TLS: pipelined requests answered in order, a slow
  header and a silent connection (no handshake at all) closed by the header timeout while
  other clients are served;
* client certificates: required with --https-client-ca (none, or one of another CA: the
  handshake fails; the CA's: served);
* unusable certificate or key files: a start-up error naming the file.

    python tests/server_py/test_https.py --hypic-bin build/hypic [--source-dir .] [unittest args]
"""
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from raw_http import Conn, fetch, request_bytes  # noqa: E402
from server_proc import Process, parse_own_args  # noqa: E402

OPTS, UNITTEST_ARGV = parse_own_args(sys.argv)
MODEL_DIR = os.path.join(OPTS["source_dir"], "tests", "models", "qwen3_5_dense")
MODEL = "qwen3_5_dense"
KEY = "https-key-3"
PORT_RE = re.compile(r"hypic serve: model '[^']*' on (https?)://[0-9.]+:(\d+)")
CERTS = tempfile.mkdtemp(prefix="hypic-https-certs-")


def cert(name):
    return os.path.join(CERTS, name)


def client_ctx(ca="ca.pem", chain=None):
    """A client context trusting `ca`, presenting `chain` (NAME: NAME.pem + NAME.key) if given."""
    ctx = ssl.create_default_context(cafile=cert(ca))
    if chain:
        ctx.load_cert_chain(cert(chain + ".pem"), cert(chain + ".key"))
    return ctx


class Server(Process):
    def __init__(self, *extra, tls=True):
        args = [OPTS["hypic_bin"], "serve", "--model", MODEL_DIR, "--port", "0", "--dtype", "f32",
                "--cache-mem", "64", "--api-key", KEY]
        if tls:
            args += ["--https-cert", cert("member.pem"), "--https-key", cert("member.key")]
        super().__init__(args + list(extra), prefix="hypic-https-")
        self.tls = client_ctx() if tls else None

    def start(self):
        return self.spawn(PORT_RE, 2, 30.0, lambda: (fetch(self.port, "GET", "/health", tls=self.tls, timeout=2) or
                                                     type("R", (), {"status": 0})).status == 200)


def chat(max_tokens=6, stream=False):
    return {"model": MODEL, "messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": max_tokens,
            "temperature": 0, "stream": stream}


class Https(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--header-timeout", "2")
        cls.srv.start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.cleanup()

    def assert_serves(self):
        r = fetch(self.srv.port, "GET", "/v1/models", key=KEY, tls=self.srv.tls, timeout=10)
        self.assertIsNotNone(r)
        self.assertEqual(r.status, 200, r)

    def test_openai_client_over_https(self):
        try:
            import openai
            try:  # the HTTP client the installed openai package is built on
                import httpx2 as httpx
            except ImportError:
                import httpx
        except ImportError:
            self.skipTest("the openai package is missing (scripts/install.sh)")
        plain = Server(tls=False)
        self.addCleanup(plain.cleanup)
        plain.start()
        answers = []
        for base, verify in (("https://127.0.0.1:%d/v1" % self.srv.port, client_ctx()),
                             ("http://127.0.0.1:%d/v1" % plain.port, True)):
            with httpx.Client(verify=verify) as h:
                c = openai.OpenAI(base_url=base, api_key=KEY, http_client=h)
                r = c.chat.completions.create(**{k: v for k, v in chat().items() if k != "stream"})
                s = c.chat.completions.create(**chat(stream=True))
                streamed = "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices)
                self.assertEqual(streamed, r.choices[0].message.content)
                answers.append(r.choices[0].message.content)
        self.assertEqual(answers[0], answers[1])
        self.assertTrue(answers[0])

    def test_untrusted_server_certificate_is_refused_by_the_client(self):
        with self.assertRaises(ssl.SSLCertVerificationError):
            Conn(self.srv.port, tls=client_ctx(ca="rogue-ca.pem"))
        self.assert_serves()

    def test_plain_http_to_the_https_port(self):
        with Conn(self.srv.port, timeout=10) as c:
            c.send(request_bytes("GET", "/health"))
            r = c.read_response()
            self.assertIsNotNone(r)
            self.assertEqual(r.status, 400, r)
            self.assertEqual(r.json()["error"]["code"], "plain_http_to_https_port")
            self.assertTrue(c.wait_closed(10))
        self.assert_serves()

    def test_pipelined_requests_in_order(self):
        with Conn(self.srv.port, tls=self.srv.tls, timeout=30) as c:
            body = json.dumps(chat(max_tokens=3)).encode()
            c.send(request_bytes("GET", "/health") +
                   request_bytes("POST", "/v1/chat/completions", key=KEY, body=body, content_type="application/json") +
                   request_bytes("GET", "/v1/models", key=KEY))
            first, second, third = c.read_response(), c.read_response(), c.read_response()
        self.assertEqual([first.status, second.status, third.status], [200, 200, 200])
        self.assertEqual(first.json(), {"status": "ok"})
        self.assertEqual(second.json()["object"], "chat.completion")
        self.assertEqual(third.json()["object"], "list")

    def test_slow_header_and_silent_connections_are_closed(self):
        slow = Conn(self.srv.port, tls=self.srv.tls, timeout=30)
        silent = socket.create_connection(("127.0.0.1", self.srv.port), timeout=30)  # not even a ClientHello
        try:
            slow.send(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
            self.assert_serves()  # others are served meanwhile
            self.assertTrue(slow.wait_closed(20), "a slow header outlived --header-timeout")
            self.assertEqual(silent.recv(1), b"", "a connection without a handshake outlived --header-timeout")
        finally:
            slow.close()
            silent.close()
        self.assert_serves()


class ClientCertificates(unittest.TestCase):
    def test_required_and_checked(self):
        srv = Server("--https-client-ca", cert("ca.pem"))
        self.addCleanup(srv.cleanup)
        srv.tls = client_ctx(chain="member")
        srv.start()
        ok = fetch(srv.port, "GET", "/v1/models", key=KEY, tls=client_ctx(chain="member"), timeout=10)
        self.assertEqual(ok.status, 200, ok)
        for ctx in (client_ctx(), client_ctx(chain="rogue")):  # none; one of another CA
            try:
                r = fetch(srv.port, "GET", "/v1/models", key=KEY, tls=ctx, timeout=10)
            except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
                r = None
            self.assertIsNone(r, "served without a certificate of the CA")
        self.assertEqual(fetch(srv.port, "GET", "/health", tls=srv.tls, timeout=10).status, 200)


class BadFiles(unittest.TestCase):
    def test_start_up_errors_name_the_file(self):
        missing = os.path.join(CERTS, "missing.pem")
        cases = [(["--https-cert", missing, "--https-key", cert("member.key")], missing),
                 (["--https-cert", cert("member.pem"), "--https-key", cert("ca.pem")], cert("ca.pem")),
                 (["--https-cert", cert("member.pem"), "--https-key", cert("rogue.key")], "is not the key"),
                 (["--https-cert", cert("member.pem")], "--https-key"),
                 (["--https-client-ca", cert("ca.pem")], "--https-cert")]
        for extra, needle in cases:
            r = subprocess.run([OPTS["hypic_bin"], "serve", "--model", MODEL_DIR, "--port", "0"] + extra,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2, (extra, r.stderr))
            self.assertIn(needle, r.stderr, extra)


if __name__ == "__main__":
    if not OPTS["hypic_bin"] or not os.access(OPTS["hypic_bin"], os.X_OK):
        print("ERROR: the hypic binary is missing: pass --hypic-bin PATH")
        sys.exit(2)
    subprocess.run(["sh", os.path.join(OPTS["source_dir"], "tests", "common", "make_certs.sh"), CERTS], check=True)
    try:
        unittest.main(argv=UNITTEST_ARGV)
    finally:
        subprocess.run(["rm", "-rf", CERTS])
