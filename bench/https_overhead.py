#!/usr/bin/env python3
"""What TLS costs on the HTTP front: one `hypic serve` binary started twice on the same model,
plain HTTP and HTTPS (--https-cert / --https-key; certificates made by
tests/common/make_certs.sh in a temporary directory), measured in alternating rounds with
bench/http_front.py's idle phase: warm streaming chats (one cached segment + a question, 1
token) and GET /health, one after another,
  kept     on one kept-alive connection (the handshake paid once), and
  fresh    on a new connection per request (a TCP and, for HTTPS, a TLS handshake each).
The HTTP overhead of a chat = client TTFT (first content event) − the server's
usage.hypic.ttft_ms. Prints one JSON document: p50 / p99 per scheme and connection kind, and
the HTTPS − HTTP differences.

    python3 bench/https_overhead.py --hypic-bin build/hypic --model models/hypic-tiny [--n 200 --rounds 3]
"""
import argparse
import json
import os
import ssl
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_front import measure, model_name, start_server  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hypic-bin", default=os.path.join(REPO, "build", "hypic"))
    ap.add_argument("--model", default=os.path.join(REPO, "models", "hypic-tiny"))
    ap.add_argument("--n", type=int, default=200, help="requests of each kind per round")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (plain, https, plain, ...)")
    a = ap.parse_args()
    certs = tempfile.mkdtemp(prefix="hypic-https-bench-")
    subprocess.run(["sh", os.path.join(REPO, "tests", "common", "make_certs.sh"), certs], check=True)
    ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.pem"))
    tls_args = ["--https-cert", os.path.join(certs, "member.pem"), "--https-key", os.path.join(certs, "member.key")]
    servers = {"http": start_server(a.hypic_bin, a.model, []), "https": start_server(a.hypic_bin, a.model, tls_args)}
    name = model_name(a.model)
    runs = {(s, k): [] for s in servers for k in ("kept", "fresh")}
    try:
        for r in range(a.rounds):
            for scheme, (_, port, _) in servers.items():
                for kind in ("kept", "fresh"):
                    print("round %d/%d: %s %s" % (r + 1, a.rounds, scheme, kind), file=sys.stderr)
                    runs[(scheme, kind)].append(measure(port, name, a.n, 30, 120, tls=ctx if scheme == "https" else None,
                                                        fresh=kind == "fresh"))
    finally:
        for p, _, _ in servers.values():
            p.terminate()
            p.wait(30)
        subprocess.run(["rm", "-rf", certs])
    out = {"model": a.model, "n": a.n, "rounds": a.rounds, "results": {}}
    for (scheme, kind), ms in runs.items():
        # the median over rounds of each figure
        keys = [k for k in ms[0] if k.endswith("_ms")]
        agg = {k: sorted(m[k] for m in ms if m[k] is not None)[len(ms) // 2] for k in keys}
        agg.update({k: sum(m[k] for m in ms) for k in ("sent", "timeouts", "errors")})
        out["results"]["%s_%s" % (scheme, kind)] = agg
    for kind in ("kept", "fresh"):
        h, s = out["results"]["http_" + kind], out["results"]["https_" + kind]
        out["https_minus_http_" + kind] = {k: s[k] - h[k] for k in h if k.endswith("_ms") and h[k] is not None
                                           and s[k] is not None}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
