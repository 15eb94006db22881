#!/usr/bin/env python3
"""Proves that a change alters no output bit: builds a base commit beside this tree and
compares, on this machine (so on one kernel tier),

* every committed checkpoint's outputs (tests/tools/output_bits.cpp: forward logits, composed
  prefills in every PIC mode at seams 0 / 2 / 8 with decode steps, batched decode, segment-entry
  bytes; f32, bf16, int8, q4), hash for hash;
* the HTTP bytes of the server suites (openai_client, anthropic, tools, router): each suite
  runs against the base binary twice and this tree's once, every HTTP connection recorded
  through a proxy (tests/server_py/server_proc.py, HYPIC_RECORD_DIR); ports, ids, dates,
  timings and random salts are masked, keep-alive connections split into their exchanges,
  chunked bodies joined; a stream the client cut, or one ended by an error event, is the same
  when one run's events are a prefix of the other's. A request whose response differs between
  the two base runs is nondeterministic (sampling without a seed, a race the test allows),
  as is a GET answered differently within one run (a state view polled until some state is
  reached), and counted apart; any other request whose response changed is a difference.

    scripts/compare_outputs.py --base REF [--suites a,b] [--no-http] [--keep]

Exit 0 when nothing differs; 1 with the differences listed. Needs `make build` done here; the
base is checked out and built under /tmp/hypic-compare/<sha> (reused while it exists).
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = ["hypic", "hypic_output_bits"]


def sh(args, **kw):
    return subprocess.run(args, check=True, **kw)


def build(src, build_dir):
    sh(["cmake", "-S", src, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release"], stdout=subprocess.DEVNULL)
    sh(["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 2), "--target"] + TARGETS,
       stdout=subprocess.DEVNULL)
    return os.path.join(build_dir, "hypic"), os.path.join(build_dir, "tests", "hypic_output_bits")


def checkout(ref):
    sha = sh(["git", "-C", ROOT, "rev-parse", ref], capture_output=True, text=True).stdout.strip()
    d = os.path.join(tempfile.gettempdir(), "hypic-compare", sha[:12])
    if not os.path.isdir(d):
        sh(["git", "-C", ROOT, "worktree", "add", "--force", "--detach", d, sha], stdout=subprocess.DEVNULL)
    # Ignored inputs the build takes from the tree (the tokenizer's rank file).
    for rel in ("third_party/qwen3.5-tokenizer/tiktoken.model",):
        src, dst = os.path.join(ROOT, rel), os.path.join(d, rel)
        if os.path.exists(src) and not os.path.exists(dst):
            os.symlink(src, dst)
    return sha, d


def output_bits(tool):
    out = sh([tool, ROOT], capture_output=True, text=True).stdout
    return {r["case"]: r.get("sha256", "error: " + r.get("error", "")) for r in map(json.loads, out.splitlines())}


MASKS = [
    (re.compile(r"(127\.0\.0\.1|localhost):\d+"), r"\1:PORT"),
    (re.compile(r"(?im)^(date|x-request-id|request-id):.*$"), r"\1: *"),
    # Random salts and keys (uuid4, secrets), ids and segment keys made under them.
    (re.compile(r"(?<![0-9A-Za-z])(?=[0-9]*[a-f])[0-9a-f]{8,}(?![0-9A-Za-z])"), "HEX"),
    (re.compile(r'"(id|system_fingerprint)":\s*"[^"]*"'), r'"\1":"*"'),
    (re.compile(r'"created":\s*\d+'), '"created":0'),
    (re.compile(r'"(\w*_(ms|s|us|per_second)|\w*seconds\w*|uptime\w*)":\s*[-0-9.e+]+'), r'"\1":0'),
]


def mask(s):
    for rx, rep in MASKS:
        s = rx.sub(rep, s)
    return s


CUT = b"(cut before its end)"


STREAM_ERROR = 'data: {"error":'


def same(a, b):
    """Two runs answered a request alike: the same responses, or one response each and either
    both cut by the client before their end, one a prefix of the other (a client that stops
    reading after the first events sees more or fewer of them, by timing alone), or both
    streams ended by the same error event, the events before it one a prefix of the other's
    (an instance stopped mid-stream had sent more or fewer of them, by timing alone)."""
    if a == b:
        return True
    if not a or not b or len(a) != 1 or len(b) != 1:
        return False
    x, y = next(iter(a)), next(iter(b))
    if CUT.decode() in x and CUT.decode() in y:
        return x.startswith(y) or y.startswith(x)
    i, j = x.rfind(STREAM_ERROR), y.rfind(STREAM_ERROR)
    if i < 0 or j < 0 or x[i:] != y[j:]:
        return False
    return x[:i].startswith(y[:j]) or y[:j].startswith(x[:i])


def split_http(blob, response):
    """The messages of one direction of an HTTP/1 connection: (head without its length
    headers, body de-chunked), in order; a response without a length runs to the close."""
    out, pos = [], 0
    while pos < len(blob):
        end = blob.find(b"\r\n\r\n", pos)
        if end < 0:
            out.append((blob[pos:], b""))
            break
        head, pos = blob[pos:end], end + 4
        lines = head.split(b"\r\n")
        fields = {l.split(b":", 1)[0].strip().lower(): l.split(b":", 1)[1].strip() for l in lines[1:] if b":" in l}
        keep = [l for l in lines if l.split(b":", 1)[0].strip().lower() not in (b"content-length", b"transfer-encoding")]
        body = b""
        if b"content-length" in fields:
            n = int(fields[b"content-length"])
            body, pos = blob[pos:pos + n], pos + n
        elif fields.get(b"transfer-encoding", b"").lower() == b"chunked":
            keep.append(CUT)  # until the last chunk is seen
            while pos < len(blob):
                eol = blob.find(b"\r\n", pos)
                if eol < 0:
                    break
                n = int(blob[pos:eol].split(b";")[0] or b"0", 16)
                body += blob[eol + 2:eol + 2 + n]
                pos = eol + 2 + n + 2
                if n == 0:
                    keep.remove(CUT)
                    break
        elif response and not lines[0].split(b" ")[1:2] in ([b"204"], [b"304"]):
            body, pos = blob[pos:], len(blob)
        out.append((b"\r\n".join(keep), body))
    return out


def http_run(binary, suite, folder):
    os.makedirs(folder, exist_ok=True)
    env = dict(os.environ, HYPIC_RECORD_DIR=folder)
    py = os.path.join(ROOT, ".venv", "bin", "python")
    r = subprocess.run([py if os.path.exists(py) else sys.executable,
                        os.path.join(ROOT, "tests", "server_py", "test_%s.py" % suite),
                        "--hypic-bin", binary, "--source-dir", ROOT], env=env, capture_output=True, text=True)
    pairs = collections.defaultdict(set)
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                reqs = split_http(rec["request"].encode("latin-1"), False)
                resps = split_http(rec["response"].encode("latin-1"), True)
                for i, (head, body) in enumerate(reqs):
                    resp = resps[i] if i < len(resps) else (b"(no response)", b"")
                    key = mask((head + b"\n\n" + body).decode("latin-1"))
                    pairs[key].add(mask((resp[0] + b"\n\n" + resp[1]).decode("latin-1")))
    return r.returncode, r.stderr[-2000:], pairs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the commit to compare against (e.g. HEAD~3)")
    ap.add_argument("--suites", default="openai_client,anthropic,tools,router")
    ap.add_argument("--no-http", action="store_true", help="compare the checkpoint outputs only")
    args = ap.parse_args()

    sha, base_src = checkout(args.base)
    print("building base %s in %s" % (sha[:12], base_src), file=sys.stderr)
    base_bin, base_bits = build(base_src, os.path.join(base_src, "build"))
    print("building this tree", file=sys.stderr)
    new_bin, new_bits = build(ROOT, os.path.join(ROOT, "build"))

    report, bad = {"base": sha}, 0
    print("checkpoint outputs", file=sys.stderr)
    a, b = output_bits(base_bits), output_bits(new_bits)
    diff = sorted(k for k in set(a) & set(b) if a[k] != b[k]) + sorted(set(a) - set(b))
    report["outputs"] = {"cases": len(a), "differ": diff, "new_cases": len(set(b) - set(a))}
    bad += len(diff)

    if not args.no_http:
        report["http"] = {}
        work = tempfile.mkdtemp(prefix="hypic-compare-http-")
        for suite in args.suites.split(","):
            print("suite %s" % suite, file=sys.stderr)
            runs = [http_run(binary, suite, os.path.join(work, "%s-%d" % (suite, i)))
                    for i, binary in enumerate((base_bin, new_bin, base_bin))]
            (rc0, _, b0), (rc1, err1, n1), (rc2, _, b2) = runs
            unstable = {k for k in set(b0) | set(b2) if not same(b0.get(k), b2.get(k))}
            # A GET answered differently within one run is a state view the tests poll until
            # some state is reached (/v1/cluster, /metrics): how many states a run sees before
            # that is timing.
            unstable |= {k for run in (b0, n1, b2) for k, v in run.items() if k.startswith("GET ") and len(v) > 1}
            changed = sorted(k for k in set(b0) | set(n1) if k not in unstable and not same(b0.get(k), n1.get(k)))
            report["http"][suite] = {"requests": len(set(b0) | set(n1)), "nondeterministic": len(unstable),
                                     "differ": len(changed), "exit": [rc0, rc1, rc2]}
            for k in changed[:5]:
                print("--- %s: request\n%s\n--- base\n%s\n--- new\n%s" % (
                    suite, k[:1500], "\n".join(b0.get(k, ["(none)"]))[:1500], "\n".join(n1.get(k, ["(none)"]))[:1500]))
            if rc1 != 0:
                print(err1)
            bad += len(changed) + (rc1 != 0)
    print(json.dumps(report, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
