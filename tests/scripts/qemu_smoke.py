#!/usr/bin/env python3
"""hypic on an honest AVX2-only CPU: the same binary under `qemu-x86_64 -cpu Haswell` (Debian's
qemu-user; its CPUID reports AVX2, FMA and F16C and no AVX-512 or AVX-VNNI), against the native
run capped with HYPIC_MAX_ISA=avx2 (the code path an AVX2 CPU takes).

    python3 tests/scripts/qemu_smoke.py --hypic-bin build/hypic [--source-dir .]

Checks, on the embedded model (models/hypic-tiny; greedy, so the text is a function of the
arithmetic):
  * `hypic run` in each weight type (bf16, f32, int8, q4): the emulated run names the avx2 tier
    and its text equals the capped native run's;
  * `hypic serve` (q4) under qemu answers a chat completion with the text the capped native
    server gives.
Exit 77 (ctest SKIP) when qemu-x86_64 is missing (scripts/install.sh installs qemu-user).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

QEMU = ["qemu-x86_64", "-cpu", "Haswell"]
# A question in hypic-tiny's trained format (models/hypic-tiny/README.md): its greedy answer
# restates a fact, so a numeric difference shows in the text.
SYSTEM = "You answer questions using only the documents provided. Reply with the answer only."
PROMPT = ("Fidranwick is a gentle town with a rainy well. The mayor of Fidranwick is Drovem Pidantre. "
          "The river of Fidranwick is Memtroumwaim.\n\nQuestion: Who is the mayor of Fidranwick?")
TOKENS = 20
PORT_RE = re.compile(r"hypic serve: model '[^']*' on http://127\.0\.0\.1:(\d+)")


def env(cap):
    """The environment of a run; cap: an HYPIC_MAX_ISA tier, or None (the CPU's own)."""
    e = dict(os.environ)
    e.update({"OMP_WAIT_POLICY": "passive", "OMP_NUM_THREADS": "2"})  # no re-exec: it would leave qemu
    e.pop("HYPIC_MAX_ISA", None)
    if cap:
        e["HYPIC_MAX_ISA"] = cap
    return e


def run(cmd, cap, timeout=900):
    r = subprocess.run(cmd, env=env(cap), capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        sys.exit("FAIL: %s exited %d:\n%s" % (" ".join(cmd), r.returncode, r.stderr[-3000:]))
    return r


def tier_of(stderr):
    m = re.search(r"ISA tier: (\w+)", stderr)
    return m.group(1) if m else None


class Server:
    """A `hypic serve` on a free loopback port, its log in a file."""

    def __init__(self, cmd, cap, log):
        self.log = log
        self.proc = subprocess.Popen(cmd + ["--port", "0"], env=env(cap), stdout=subprocess.DEVNULL,
                                     stderr=open(log, "w"))
        deadline = time.monotonic() + 600
        self.port = None
        while self.port is None:
            m = PORT_RE.search(open(log).read())
            if m:
                self.port = int(m.group(1))
            elif self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                sys.exit("FAIL: %s did not start:\n%s" % (" ".join(cmd), open(log).read()[-3000:]))
            else:
                time.sleep(0.2)

    def chat(self, model):
        body = json.dumps({"model": model, "messages": [{"role": "system", "content": SYSTEM},
                                                        {"role": "user", "content": PROMPT}],
                           "max_tokens": TOKENS, "temperature": 0}).encode()
        req = urllib.request.Request("http://127.0.0.1:%d/v1/chat/completions" % self.port, body,
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.load(r)["choices"][0]["message"]["content"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hypic-bin", required=True)
    ap.add_argument("--source-dir", default=".")
    a = ap.parse_args()
    if shutil.which(QEMU[0]) is None:
        print("SKIP: qemu-x86_64 not found; run scripts/install.sh (it installs qemu-user)")
        return 77
    model = os.path.join(a.source_dir, "models", "hypic-tiny")
    if not os.path.exists(os.path.join(model, "config.json")):
        model = os.path.join(a.source_dir, "tests", "models", "qwen3_5_dense")
    hypic = os.path.abspath(a.hypic_bin)

    for dtype in ("bf16", "f32", "int8", "q4"):
        cmd = [hypic, "run", "--model", model, "--chat", "--system", SYSTEM, "--prompt", PROMPT,
               "--max-tokens", str(TOKENS), "--dtype", dtype]
        t0 = time.monotonic()
        native = run(cmd, cap="avx2")
        emulated = run(QEMU + cmd, cap=None)
        if tier_of(native.stderr) != "avx2" or tier_of(emulated.stderr) != "avx2":
            sys.exit("FAIL: %s: tiers native %s, qemu %s (want avx2 both)\n%s" %
                     (dtype, tier_of(native.stderr), tier_of(emulated.stderr), emulated.stderr[-2000:]))
        if "capped" in emulated.stderr.split("ISA tier:", 1)[1].split("|", 1)[0]:
            sys.exit("FAIL: the emulated CPU was capped, not detected as AVX2-only:\n" + emulated.stderr[-2000:])
        if native.stdout != emulated.stdout:
            sys.exit("FAIL: %s: qemu's text differs from the capped native run's:\n  native: %r\n  qemu:   %r" %
                     (dtype, native.stdout, emulated.stdout))
        print("ok   run --dtype %-4s  %.1f s  %r" % (dtype, time.monotonic() - t0, native.stdout.strip()[:60]),
              flush=True)

    texts = {}
    for name, cmd, cap in (("native", [hypic], "avx2"), ("qemu", QEMU + [hypic], None)):
        log = "/tmp/hypic-qemu-smoke-%s-%d.log" % (name, os.getpid())
        # q4: the server's path under an honest CPUID (every dtype's kernels ran above);
        # bf16 would add a minute of emulated oneDNN code generation for its prefill shapes.
        s = Server(cmd + ["serve", "--model", model, "--dtype", "q4"], cap, log)
        try:
            texts[name] = s.chat(os.path.basename(os.path.normpath(model)))
        finally:
            s.stop()
            os.unlink(log)
    if texts["native"] != texts["qemu"]:
        sys.exit("FAIL: serve: qemu's answer differs from the capped native server's:\n  native: %r\n  qemu:   %r" %
                 (texts["native"], texts["qemu"]))
    print("ok   serve chat  %r" % texts["qemu"][:60])
    return 0


if __name__ == "__main__":
    sys.exit(main())
