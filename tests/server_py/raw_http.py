"""A raw HTTP/1.1 client for tests (stdlib only): exact bytes out, a strict parse of what
comes back, so a test sees what the server really sent."""
import json
import re
import socket
import ssl
import time

HOST = "127.0.0.1"


class Resp:
    def __init__(self, status, reason, headers, body, raw_head):
        self.status, self.reason, self.headers, self.body, self.raw_head = status, reason, headers, body, raw_head

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def closes(self):
        return (self.header("Connection") or "").lower() == "close"

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<%d %r %r>" % (self.status, self.raw_head[:300], self.body[:300])


class Closed(Exception):
    """The peer closed (or reset) the connection in the middle of a response."""


class Conn:
    """One client connection; `src` binds it to another loopback source address first; `tls`
    (an ssl.SSLContext) speaks HTTPS over it (the handshake done here)."""

    def __init__(self, port, src=None, timeout=20.0, tls=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if src:
                self.sock.bind((src, 0))
            self.sock.settimeout(timeout)
            self.sock.connect((HOST, port))
            if tls is not None:
                self.sock = tls.wrap_socket(self.sock, server_hostname=HOST)
        except BaseException:
            self.sock.close()
            raise
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.buf = b""
        self.eof = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        """False if the peer had already closed (a closed connection is a valid answer to some cases)."""
        try:
            self.sock.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            return False

    def _fill(self, deadline):
        """Reads more into buf; False at EOF (or a reset); raises TimeoutError past the deadline."""
        if self.eof:
            return False
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no bytes within the deadline; got so far: %r" % self.buf[:300])
        self.sock.settimeout(left)
        try:
            d = self.sock.recv(65536)
        except socket.timeout:
            raise TimeoutError("no bytes within the deadline; got so far: %r" % self.buf[:300])
        except (ConnectionResetError, ConnectionAbortedError, ssl.SSLError):  # a TLS peer gone counts as closed
            d = b""
        if not d:
            self.eof = True
            return False
        self.buf += d
        return True

    def _take_line(self, deadline):
        while b"\r\n" not in self.buf:
            if not self._fill(deadline):
                raise Closed("closed mid-line: %r" % self.buf[:300])
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _take(self, n, deadline):
        while len(self.buf) < n:
            if not self._fill(deadline):
                raise Closed("closed with %d of %d body bytes" % (len(self.buf), n))
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_head(self, timeout=None):
        """(status, reason, headers, raw head) of the next response, or None when the connection
        closed before any byte of it."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while b"\r\n\r\n" not in self.buf:
            if not self._fill(deadline):
                if self.buf:
                    raise Closed("closed mid-head: %r" % self.buf[:300])
                return None
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        m = re.match(rb"HTTP/1\.[01] (\d{3}) ?(.*)$", lines[0])
        if not m:
            raise AssertionError("not an HTTP/1.x status line: %r" % head[:300])
        headers = []
        for ln in lines[1:]:
            k, sep, v = ln.partition(b":")
            if not sep:
                raise AssertionError("malformed response header line %r" % ln)
            headers.append((k.decode("latin-1").strip(), v.decode("latin-1").strip()))
        return int(m.group(1)), m.group(2).decode("latin-1"), headers, head

    def read_chunk(self, timeout=None):
        """The next chunk of a chunked body; b"" for the last one."""
        deadline = time.monotonic() + (timeout or self.timeout)
        size_line = self._take_line(deadline)
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            while self._take_line(deadline):  # trailers, up to the empty line
                pass
            return b""
        data = self._take(size, deadline)
        if self._take(2, deadline) != b"\r\n":
            raise AssertionError("chunk not followed by CRLF")
        return data

    def read_response(self, timeout=None):
        """The next whole response (1xx skipped), or None when the connection closed first."""
        t = timeout or self.timeout
        deadline = time.monotonic() + t
        while True:
            h = self.read_head(t)
            if h is None:
                return None
            status, reason, headers, raw = h
            if 100 <= status < 200:
                continue
            r = Resp(status, reason, headers, b"", raw)
            break
        te = (r.header("Transfer-Encoding") or "").lower()
        cl = r.header("Content-Length")
        if te == "chunked":
            parts = []
            while True:
                c = self.read_chunk(max(0.1, deadline - time.monotonic()))
                if not c:
                    break
                parts.append(c)
            r.body = b"".join(parts)
        elif cl is not None:
            r.body = self._take(int(cl), deadline)
        else:  # until the connection closes
            while self._fill(deadline):
                pass
            r.body, self.buf = self.buf, b""
        return r

    def wait_closed(self, timeout=10.0):
        """True once the peer closed (EOF or reset) within `timeout`; what it sent meanwhile stays in buf."""
        deadline = time.monotonic() + timeout
        try:
            while self._fill(deadline):
                pass
        except TimeoutError:
            return False
        return True


def request_bytes(method, path, key=None, body=None, headers=(), content_type=None, chunked=False,
                  version="HTTP/1.1"):
    """A request's bytes. body: None (no body headers), or bytes sent with Content-Length, or
    with Transfer-Encoding: chunked (one chunk, then the last) when chunked."""
    lines = ["%s %s %s" % (method, path, version), "Host: 127.0.0.1"]
    if key is not None:
        lines.append("Authorization: Bearer " + key)
    if content_type is not None:
        lines.append("Content-Type: " + content_type)
    lines.extend(headers)
    if body is not None and chunked:
        lines.append("Transfer-Encoding: chunked")
        payload = (b"%x\r\n%s\r\n" % (len(body), body) if body else b"") + b"0\r\n\r\n"
    elif body is not None:
        lines.append("Content-Length: %d" % len(body))
        payload = body
    else:
        payload = b""
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload


def fetch(port, method, path, key=None, body=None, src=None, timeout=30.0, tls=None, **kw):
    """One request on a fresh connection: its response (None if closed unanswered)."""
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        kw.setdefault("content_type", "application/json")
    with Conn(port, src=src, timeout=timeout, tls=tls) as c:
        c.send(request_bytes(method, path, key=key, body=body, **kw))
        return c.read_response()


def sse_events(data):
    """The `data:` payloads of a Server-Sent Events body, in order."""
    out = []
    for block in data.decode("utf-8", "replace").split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data: "):
                out.append(line[len("data: "):])
    return out
