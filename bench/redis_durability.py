#!/usr/bin/env python3
"""Which Redis persistence keeps registrations across a Redis crash: for each setting, a
redis-server on a free loopback port, `hypic serve --segment-store` registering N segments
(each acknowledged with 200), the instance killed (-9, so it cannot re-publish), then Redis
killed -9 and restarted on the same directory; counts the acknowledged ids whose record came
back. Prints JSON lines.

    python3 bench/redis_durability.py --hypic-bin build/hypic --model tests/models/qwen3_5_dense [--n 300]
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "server_py"))
from test_shared import free_port, resp  # noqa: E402

SETTINGS = {
    "aof-always": ["--appendonly", "yes", "--appendfsync", "always", "--save", ""],
    "aof-everysec": ["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""],
    "none": ["--appendonly", "no", "--save", ""],
}


def wait(cond, what, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if cond():
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for " + what)


def post(port, body):
    req = urllib.request.Request("http://127.0.0.1:%d/v1/segments" % port, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status, json.loads(r.read())


def run(setting, args, a):
    d = tempfile.mkdtemp(prefix="hypic-redis-dur-")
    port = free_port()
    cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", d] + args
    redis = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    wait(lambda: resp(port, "PING") == "PONG", "redis")
    http = free_port()
    serve = subprocess.Popen([a.hypic_bin, "serve", "--model", a.model, "--port", str(http), "--dtype", "f32",
                              "--segment-store", "redis://127.0.0.1:%d" % port], stderr=subprocess.DEVNULL)
    wait(lambda: urllib.request.urlopen("http://127.0.0.1:%d/health" % http, timeout=2).status == 200, "hypic serve")
    ids = []
    for i in range(a.n):
        st, r = post(http, {"text": "Registration %d of the durability run: a short note about rivers." % i})
        if st == 200:
            ids.append(r["id"])
    serve.kill()
    serve.wait()
    redis.kill()  # SIGKILL: no shutdown save, no AOF rewrite
    redis.wait()
    redis = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    wait(lambda: resp(port, "PING") == "PONG", "redis again")
    kept = sum(1 for sid in ids if resp(port, "EXISTS", "hypic:r:" + sid) == 1)
    redis.kill()
    redis.wait()
    shutil.rmtree(d, True)
    return {"setting": setting, "acknowledged": len(ids), "kept": kept}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hypic-bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--n", type=int, default=300)
    a = ap.parse_args()
    for setting, args in SETTINGS.items():
        print(json.dumps(run(setting, args, a)), flush=True)


if __name__ == "__main__":
    main()
