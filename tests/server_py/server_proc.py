"""Helpers the server_py suites share (stdlib only): their own command-line flags, spawned
hypic processes (start, log, stop), and waiting for a condition."""
import atexit
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time


def parse_own_args(argv):
    """Takes --hypic-bin / --source-dir out of argv; the rest goes to unittest."""
    here = os.path.dirname(os.path.abspath(__file__))
    opts = {"hypic_bin": os.environ.get("HYPIC_BIN", ""),
            "source_dir": os.environ.get("HYPIC_SOURCE_DIR", os.path.normpath(os.path.join(here, "..", "..")))}
    rest = [argv[0]]
    i = 1
    while i < len(argv):
        a = argv[i]
        for flag, key in (("--hypic-bin", "hypic_bin"), ("--source-dir", "source_dir")):
            if a == flag and i + 1 < len(argv):
                opts[key] = argv[i + 1]
                i += 1
                break
            if a.startswith(flag + "="):
                opts[key] = a.split("=", 1)[1]
                break
        else:
            rest.append(a)
        i += 1
    return opts, rest


def terminate(proc, timeout=10.0):
    """SIGTERM (graceful), then SIGKILL if the process has not exited within `timeout`; the exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    return proc.returncode


def read_text(path):
    with open(path, "r", encoding="utf-8", errors="replace") as f:
        return f.read()


def wait_for(cond, timeout=15.0, interval=0.02):
    """Polls cond() until it returns a true value (returned) or `timeout` passed (None)."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            return None
        time.sleep(interval)


def _pump(src, dst, buf):
    """Copies src to dst until src ends (then half-closes dst), appending what passed to buf."""
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            buf.append(b)
            dst.sendall(b)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


_open_records = {}  # connection id -> (path, lock, sent, got): written when it closes or at exit


def _write_record(key):
    rec = _open_records.pop(key, None)
    if rec is None:
        return
    path, lock, sent, got = rec
    req = b"".join(sent)
    if req[:1].isalpha():  # HTTP/1 (not gRPC or TLS bytes)
        line = json.dumps({"request": req.decode("latin-1"), "response": b"".join(got).decode("latin-1")})
        with lock, open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


@atexit.register
def _write_open_records():
    """Keep-alive connections still open when the suite ends are recorded as they stand."""
    for key in list(_open_records):
        _write_record(key)


def _record_connection(client, port, path, lock):
    up = socket.create_connection(("127.0.0.1", port))
    sent, got = [], []
    key = id(sent)
    _open_records[key] = (path, lock, sent, got)
    t = threading.Thread(target=_pump, args=(up, client, got), daemon=True)
    t.start()
    _pump(client, up, sent)
    t.join()
    client.close()
    up.close()
    _write_record(key)


def recorded(port):
    """The port a client should use for a server on `port`: `port` itself, or, when
    HYPIC_RECORD_DIR is set (scripts/compare_outputs.py), a loopback proxy's that forwards
    every byte and appends each HTTP connection's request and response bytes to a JSON-lines
    file in that folder."""
    folder = os.environ.get("HYPIC_RECORD_DIR")
    if not folder:
        return port
    listener = socket.create_server(("127.0.0.1", 0))
    path = os.path.join(folder, "%d.jsonl" % os.getpid())
    lock = threading.Lock()

    def serve():
        while True:
            client, _ = listener.accept()
            threading.Thread(target=_record_connection, args=(client, port, path, lock), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1]


class Process:
    """A spawned hypic process whose stderr (one JSON line per request or event, and the
    line naming its port) goes to a temporary file. Subclasses say when it is ready."""

    def __init__(self, args, prefix="hypic-", env=None):
        self.args = list(args)
        self.env = dict(env or {})  # added to the process's environment
        self.proc = None
        self.port = None
        self.returncode = None
        self._log = tempfile.NamedTemporaryFile(prefix=prefix, suffix=".log", delete=False)

    def spawn(self, port_re, group, timeout=30.0, ready=None):
        """Starts it, reads its port from the first match of `port_re` (`group`) in its log,
        then waits until ready() (if given) is true. Raises with the log when it fails."""
        env = dict(os.environ)
        env.setdefault("OMP_WAIT_POLICY", "passive")  # spinning OpenMP threads starve the clients
        env.pop("HYPIC_API_KEY", None)
        env.update(self.env)
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self._log, env=env)
        deadline = time.monotonic() + timeout
        name = " ".join(os.path.basename(a) for a in self.args[:2])
        while self.port is None:
            m = port_re.search(self.log())
            if m:
                self.port = recorded(int(m.group(group)))
                break
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %d before listening:\n%s" % (name, self.proc.returncode, self.log()))
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("%s printed no port within %.0fs:\n%s" % (name, timeout, self.log()))
            time.sleep(0.02)
        while ready is not None:
            try:
                if ready():
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("%s was not ready within %.0fs:\n%s" % (name, timeout, self.log()))
            time.sleep(0.02)
        return self

    def stop(self, timeout=10.0):
        """SIGTERM (graceful), then SIGKILL if it does not exit; the exit status."""
        if self.proc is None:
            return self.returncode
        self.returncode = terminate(self.proc, timeout)
        self.proc = None
        return self.returncode

    def log(self):
        return read_text(self._log.name)

    def log_lines(self):
        """The JSON lines on stderr."""
        out = []
        for line in self.log().splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def cleanup(self):
        self.stop()
        self._log.close()
        try:
            os.unlink(self._log.name)
        except OSError:
            pass
