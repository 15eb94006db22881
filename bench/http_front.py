#!/usr/bin/env python3
"""The HTTP front under hostile and heavy load, side by side for two `hypic serve` binaries.

For each binary (--hypic-bin, and optionally --before BIN, e.g. a build of an older commit)
a fresh server on the same model, then, in one run:
  idle     --n warm chat requests (streaming, one cached segment + a question, 1 token) and
           --n GET /health, one after another on a kept-alive connection: client latency
           p50 / p99; for the chat also the client TTFT (first content event) minus the
           server's usage.hypic.ttft_ms = the HTTP overhead.
  attack   --slow slow-header connections (a request line and one header, then one more
           header line every --drip s, from --peers loopback source addresses 127.0.0.2...;
           a connection the server closes is reopened) held open while the same requests run
           again; a request not answered within --timeout s counts as a timeout.
  rps      --clients kept-alive clients (threads in 2 processes) for --seconds each:
           GET /health, then the cached 1-token chat (non-streaming): requests per second.
One JSON line per (binary, phase) and a summary line with the ratios. Loopback only; every
phase is bounded in time and stops by itself.

    python3 bench/http_front.py --hypic-bin build/hypic --before /tmp/old/hypic --model models/hypic-tiny
"""
import argparse
import http.client
import json
import multiprocessing
import os
import random
import re
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time

DOC = ("The lighthouse keeper of Brennwick writes down the weather every morning: wind from the "
       "west, a grey sea, the fishing boats leaving the harbour before dawn. ") * 6


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def start_server(binary, model, extra):
    log = tempfile.NamedTemporaryFile(prefix="hypic-front-bench-", suffix=".log", delete=False)
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    args = [binary, "serve", "--model", model, "--port", "0", "--max-concurrency", "16", "--max-queue", "256"] + extra
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        m = re.search(r"on https?://([0-9.]+):(\d+)", open(log.name, errors="replace").read())
        if m:
            return p, int(m.group(2)), log.name
        if p.poll() is not None:
            raise SystemExit("server exited: " + open(log.name, errors="replace").read())
        time.sleep(0.05)
    p.kill()
    raise SystemExit("server did not start")


def model_name(model):
    return os.path.basename(os.path.normpath(model))


def chat_body(model, stream):
    b = {"model": model, "temperature": 0, "max_tokens": 1,
         "messages": [{"role": "user", "content": [
             {"type": "text", "text": DOC, "cache_control": {"type": "segment"}},
             {"type": "text", "text": "Where does the keeper live?"}]}]}
    if stream:
        b["stream"] = True
        b["stream_options"] = {"include_usage": True}
    return json.dumps(b).encode()


class Client:
    """One kept-alive connection (HTTPS with `tls`, an ssl.SSLContext); reconnects after an
    error."""

    def __init__(self, port, timeout, tls=None):
        self.port, self.timeout, self.tls, self.c = port, timeout, tls, None

    def _conn(self):
        if self.c is None:
            self.c = (http.client.HTTPSConnection("127.0.0.1", self.port, timeout=self.timeout, context=self.tls)
                      if self.tls else http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout))
        return self.c

    def health(self):
        c = self._conn()
        c.request("GET", "/health")
        r = c.getresponse()
        r.read()
        return r.status

    def chat(self, body, stream):
        """(status, client TTFT s or None, server ttft ms or None)."""
        c = self._conn()
        t0 = time.perf_counter()
        c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        if not stream:
            r.read()
            return r.status, None, None
        ttft, server = None, None
        while True:
            line = r.readline()
            if not line:
                break
            if not line.startswith(b"data: "):
                continue
            data = line[6:].strip()
            if data == b"[DONE]":
                break
            ev = json.loads(data)
            if ttft is None and ev.get("choices") and ev["choices"][0].get("delta", {}).get("content"):
                ttft = time.perf_counter() - t0
            if ev.get("usage"):
                server = ev["usage"].get("hypic", {}).get("ttft_ms")
        r.read()
        return r.status, ttft, server

    def close(self):
        if self.c:
            self.c.close()
        self.c = None


def measure(port, model, n, timeout, budget, tls=None, fresh=False):
    """Sequential warm chats and health checks: latencies and timeouts. Each kind stops after
    `budget` seconds (a server that times every request out would take n x timeout). `fresh`:
    a new connection per request (with `tls`: a TLS handshake each)."""
    cl = Client(port, timeout, tls)
    body = chat_body(model, True)
    out = {"chat_ms": [], "ttft_ms": [], "overhead_ms": [], "health_ms": [], "timeouts": 0, "errors": 0, "sent": 0}
    for kind in ("chat", "health"):
        until = time.monotonic() + budget
        for _ in range(n):
            if time.monotonic() > until:
                break
            out["sent"] += 1
            t0 = time.perf_counter()
            try:
                if kind == "chat":
                    st, ttft, server = cl.chat(body, True)
                else:
                    st = cl.health()
                if st != 200:
                    out["errors"] += 1
                    continue
            except (socket.timeout, TimeoutError):
                out["timeouts"] += 1
                cl.close()
                continue
            except OSError:
                out["errors"] += 1
                cl.close()
                continue
            out[kind + "_ms"].append(1000 * (time.perf_counter() - t0))
            if fresh:
                cl.close()
            if kind == "chat" and ttft is not None:
                out["ttft_ms"].append(1000 * ttft)
                if server is not None:
                    out["overhead_ms"].append(1000 * ttft - server)
    cl.close()
    s = {"sent": out["sent"], "timeouts": out["timeouts"], "errors": out["errors"]}
    for k in ("chat_ms", "ttft_ms", "overhead_ms", "health_ms"):
        s[k[:-3] + "_p50_ms"] = pct(out[k], 50)
        s[k[:-3] + "_p99_ms"] = pct(out[k], 99)
    return s


class SlowClients:
    """`count` connections that send headers one line every `drip` s and never finish."""

    def __init__(self, port, count, peers, drip):
        self.port, self.count, self.peers, self.drip = port, count, peers, drip
        self.stop_ev = threading.Event()
        self.socks = {}  # socket -> [next drip time, index, request line sent]
        self.by_fd = {}
        self.poller = select.poll()
        self.opened = self.reopened = self.failed = 0
        self.open_samples = []
        self.th = threading.Thread(target=self.run, daemon=True)

    def _open(self, i):
        s = socket.socket()
        try:
            s.bind(("127.0.0.%d" % (2 + i % self.peers), 0))
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", self.port))
            self.socks[s] = [time.monotonic() + random.random() * self.drip, i, False]
            self.by_fd[s.fileno()] = s
            self.poller.register(s, select.POLLIN)
            self.opened += 1
        except OSError:
            self.failed += 1
            s.close()

    def run(self):
        for i in range(self.count):
            self._open(i)
        while not self.stop_ev.is_set():
            now = time.monotonic()
            for s, st in list(self.socks.items()):
                if now < st[0]:
                    continue
                try:
                    s.send(b"GET /health HTTP/1.1\r\nHost: x\r\n" if not st[2] else b"X-Slow: 1\r\n")
                    st[2] = True
                    st[0] = now + self.drip
                except BlockingIOError:
                    st[0] = now + 0.05
                except OSError:
                    st[0] = now + 0.05 if not st[2] else 0
            # Closed by the server (or answered 408 / 503): reopen, so `count` stay open.
            for fd, _ in self.poller.poll(50):
                s = self.by_fd.get(fd)
                if s is None:
                    continue
                try:
                    d = s.recv(4096)
                except OSError:
                    d = b""
                if not d:
                    i = self.socks.pop(s)[1]
                    self.poller.unregister(s)
                    del self.by_fd[fd]
                    s.close()
                    self.reopened += 1
                    self._open(i)
            self.open_samples.append(len(self.socks))
        for s in self.socks:
            s.close()

    def __enter__(self):
        self.th.start()
        time.sleep(1.0 + self.count / 2000.0)  # let them connect
        return self

    def __exit__(self, *a):
        self.stop_ev.set()
        self.th.join(30)


def rps_worker(port, kind, body, seconds, threads, q):
    done = [0] * threads
    errors = [0] * threads

    def loop(i):
        cl = Client(port, 10)
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            try:
                st = cl.health() if kind == "health" else cl.chat(body, False)[0]
                if st == 200:
                    done[i] += 1
                else:
                    errors[i] += 1
            except OSError:
                errors[i] += 1
                cl.close()
        cl.close()

    ths = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    q.put((sum(done), sum(errors)))


def rps(port, model, kind, clients, seconds):
    q = multiprocessing.Queue()
    body = chat_body(model, False)
    procs = [multiprocessing.Process(target=rps_worker, args=(port, kind, body, seconds, clients // 2, q)) for _ in range(2)]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    res = [q.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join()
    wall = time.perf_counter() - t0
    return {"requests": sum(r[0] for r in res), "errors": sum(r[1] for r in res),
            "rps": sum(r[0] for r in res) / seconds, "wall_s": wall}


def bench_binary(label, binary, a):
    proc, port, log = start_server(binary, a.model, a.server_args.split())
    name = model_name(a.model)
    out = {"binary": label, "path": binary}
    try:
        Client(port, 30).chat(chat_body(name, True), True)  # cold: builds the segment's entry
        out["idle"] = measure(port, name, a.n, a.timeout, a.budget)
        print(json.dumps({"binary": label, "phase": "idle", **out["idle"]}), flush=True)
        with SlowClients(port, a.slow, a.peers, a.drip) as sc:
            out["attack"] = measure(port, name, a.n, a.timeout, a.budget)
            out["attack"].update({"slow_connections": a.slow, "slow_open_mean": (sum(sc.open_samples) / max(1, len(sc.open_samples))),
                                  "slow_reopened": sc.reopened, "slow_failed": sc.failed})
        print(json.dumps({"binary": label, "phase": "attack", **out["attack"]}), flush=True)
        time.sleep(1)
        for kind in ("health", "chat"):
            out["rps_" + kind] = rps(port, name, kind, a.clients, a.seconds)
            print(json.dumps({"binary": label, "phase": "rps_" + kind, "clients": a.clients, **out["rps_" + kind]}), flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        os.unlink(log)
    return out


def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def main():
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hypic-bin", required=True, help="the binary to measure ('after')")
    ap.add_argument("--before", help="a second binary measured the same way ('before')")
    ap.add_argument("--model", required=True)
    ap.add_argument("--n", type=int, default=100, help="requests of each kind per latency phase")
    ap.add_argument("--slow", type=int, default=1000, help="slow-header connections in the attack phase")
    ap.add_argument("--peers", type=int, default=8, help="loopback source addresses they come from")
    ap.add_argument("--drip", type=float, default=3.0, help="seconds between their header lines")
    ap.add_argument("--timeout", type=float, default=5.0, help="client timeout per request (s)")
    ap.add_argument("--budget", type=float, default=30.0, help="seconds at most per kind of request per latency phase")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=5.0, help="length of each rps phase")
    ap.add_argument("--server-args", default="", help="extra `hypic serve` flags for both binaries")
    a = ap.parse_args()
    cpu = ""
    try:
        cpu = re.search(r"model name\s*:\s*(.*)", open("/proc/cpuinfo").read()).group(1)
    except (OSError, AttributeError):
        pass
    runs = []
    if a.before:
        runs.append(bench_binary("before", a.before, a))
    runs.append(bench_binary("after", a.hypic_bin, a))
    summary = {"summary": True, "cpu": cpu, "cores": os.cpu_count(), "model": a.model, "slow": a.slow}
    for r in runs:
        lab = r["binary"]
        summary[lab + "_chat_p99_attack_over_idle"] = ratio(r["attack"]["chat_p99_ms"], r["idle"]["chat_p99_ms"])
        summary[lab + "_health_p99_attack_over_idle"] = ratio(r["attack"]["health_p99_ms"], r["idle"]["health_p99_ms"])
        summary[lab + "_attack_timeouts"] = r["attack"]["timeouts"]
    if len(runs) == 2:
        b, f = runs
        summary["overhead_p50_ms_before_after"] = [b["idle"]["overhead_p50_ms"], f["idle"]["overhead_p50_ms"]]
        summary["rps_health_after_over_before"] = ratio(f["rps_health"]["rps"], b["rps_health"]["rps"])
        summary["rps_chat_after_over_before"] = ratio(f["rps_chat"]["rps"], b["rps_chat"]["rps"])
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
