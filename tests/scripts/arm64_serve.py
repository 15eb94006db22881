#!/usr/bin/env python3
"""hypic's aarch64 build serving the embedded model under qemu-aarch64, driven by the official
`openai` client (tests/scripts/arm64_suite.sh runs it).

    python3 tests/scripts/arm64_serve.py --hypic-bin build-arm64/hypic --native-bin build/hypic \
        [--qemu "qemu-aarch64 -cpu max"] [--source-dir .]

Checks, on models/hypic-tiny (greedy, so the text is a function of the arithmetic):
  * `hypic run` in each weight type: the aarch64 text equals the x86-64 build's capped to its
    portable kernels (HYPIC_MAX_ISA=generic), and names the emulated CPU's tier;
  * `hypic serve` (q4) under qemu answers a chat completion through the openai client with the
    x86-64 server's text.
"""
import argparse
import os
import shlex
import sys
import time

import openai

from qemu_smoke import PROMPT, SYSTEM, TOKENS, Server, run, tier_of


def chat(server, model):
    client = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % server.port, api_key="none", timeout=600)
    r = client.chat.completions.create(model=model, temperature=0, max_tokens=TOKENS,
                                       messages=[{"role": "system", "content": SYSTEM},
                                                 {"role": "user", "content": PROMPT}])
    return r.choices[0].message.content


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hypic-bin", required=True, help="the aarch64 build's hypic")
    ap.add_argument("--native-bin", default="build/hypic", help="the x86-64 build's hypic")
    ap.add_argument("--qemu", default="qemu-aarch64 -cpu max")
    ap.add_argument("--source-dir", default=".")
    a = ap.parse_args()
    qemu = shlex.split(a.qemu)
    model = os.path.join(a.source_dir, "models", "hypic-tiny")
    if not os.path.exists(os.path.join(model, "config.json")):
        model = os.path.join(a.source_dir, "tests", "models", "qwen3_5_dense")
    arm, native = os.path.abspath(a.hypic_bin), os.path.abspath(a.native_bin)
    if not os.access(native, os.X_OK):
        sys.exit("FAIL: no x86-64 build at %s to compare with (make build)" % native)

    for dtype in ("bf16", "f32", "int8", "q4"):
        cmd = ["run", "--model", model, "--chat", "--system", SYSTEM, "--prompt", PROMPT,
               "--max-tokens", str(TOKENS), "--dtype", dtype]
        t0 = time.monotonic()
        want = run([native] + cmd, cap="generic")
        got = run(qemu + [arm] + cmd, cap=None)
        if want.stdout != got.stdout:
            sys.exit("FAIL: %s: aarch64's text differs from x86-64's portable kernels':\n  x86-64:  %r\n"
                     "  aarch64: %r" % (dtype, want.stdout, got.stdout))
        print("ok   run --dtype %-4s  tier %s  %.1f s  %r" % (dtype, tier_of(got.stderr), time.monotonic() - t0,
                                                            got.stdout.strip()[:60]), flush=True)

    texts = {}
    for name, cmd, cap in (("x86-64", [native], "generic"), ("aarch64", qemu + [arm], None)):
        log = "/tmp/hypic-arm64-serve-%s-%d.log" % (name, os.getpid())
        s = Server(cmd + ["serve", "--model", model, "--dtype", "q4"], cap, log)
        try:
            texts[name] = chat(s, os.path.basename(os.path.normpath(model)))
        finally:
            s.stop()
            os.unlink(log)
    if texts["x86-64"] != texts["aarch64"]:
        sys.exit("FAIL: serve: aarch64's answer differs from x86-64's:\n  x86-64:  %r\n  aarch64: %r" %
                 (texts["x86-64"], texts["aarch64"]))
    print("ok   serve chat (openai client)  %r" % texts["aarch64"][:60])
    return 0


if __name__ == "__main__":
    sys.exit(main())
