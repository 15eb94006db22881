#!/bin/bash
# Routing policies of `hypic router` side by side: for each policy a fresh router and two fresh
# `hypic serve` instances (joined), then bench/serve_bench.py through the router.
#
#   bench/router_policies.sh MODEL_DIR [OUT_DIR]
# Environment: HYPIC (binary, default build/hypic), POLS (default "affinity round-robin
# least-loaded"), PER (documents per request, default 4), DOCS (default 20), CMEM (cache MiB
# per instance, default 24), RATE (default 2), N (measured requests, default 60).
# Writes OUT_DIR/POLICY.json (serve_bench output) and prints one summary line per policy.
set -euo pipefail
M=${1:?usage: bench/router_policies.sh MODEL_DIR [OUT_DIR]}
OUT=${2:-/tmp/router_policies}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
B=${HYPIC:-$HERE/../build/hypic}
mkdir -p "$OUT"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap cleanup EXIT
for pol in ${POLS:-affinity round-robin least-loaded}; do
  "$B" router --port 18200 --grpc-port 18201 --probe-interval-ms 300 --routing "$pol" 2> "$OUT/router_$pol.log" & pids+=($!)
  for i in 1 2; do
    "$B" serve --model "$M" --port 1821$i --grpc-port 1822$i --join 127.0.0.1:18201 --max-concurrency 4 \
        --max-queue 256 --cache-mem "${CMEM:-24}" 2> "$OUT/serve${i}_$pol.log" & pids+=($!)
  done
  for _ in $(seq 100); do  # both instances healthy
    [ "$(curl -s 127.0.0.1:18200/v1/cluster | grep -o '"healthy":true' | wc -l)" -ge 2 ] && break
    sleep 0.1
  done
  python3 "$HERE/serve_bench.py" --url http://127.0.0.1:18200 --modes hypic --rates "${RATE:-2}" \
      --requests "${N:-60}" --warmup "${DOCS:-20}" --docs "${DOCS:-20}" --doc-tokens 1024 \
      --per-request "${PER:-4}" --overhead-reps 0 --inproc-reps 0 > "$OUT/$pol.json" 2> "$OUT/bench_$pol.log"
  python3 - "$OUT/$pol.json" "$pol" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); r = d["modes"]["hypic"]["rates"][0]
print(json.dumps({"routing": sys.argv[2], "segments_hit_ratio": r["segments_hit_ratio"],
                  "ttft_p50_s": r["ttft_s"]["p50"], "ttft_p90_s": r["ttft_s"]["p90"], "ok": r["ok"]}))
PY
  cleanup
done
