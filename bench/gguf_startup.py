#!/usr/bin/env python3
"""Start-up time and resident memory of one model served from different files: a GGUF file
(blocks kept as stored, tensors used in place from the mapping) against the same model from
its Hugging Face safetensors (bf16 as stored, or quantized at load to hypic's int8 / q4).

    .venv/bin/python bench/gguf_startup.py --runs 3 \\
        NAME=PATH[:DTYPE] [NAME=PATH[:DTYPE] ...]

e.g. st-bf16=/models/q35:bf16 st-q4=/models/q35:q4 gguf-q4_k_m=/models/q35-Q4_K_M.gguf

Each run is a fresh `hypic inspect --model PATH --load --dtype DTYPE` (every weight loaded
and checked, as `serve` does before it listens): wall time of the process and its peak
resident set (getrusage of the child; pages of a mapped file count once read). Runs
alternate between the models, after one untimed run of each (the files in the page cache:
a warm start, as on a serving machine; a cold one is bounded by the disk). Prints one JSON
document: per model the min / median / max of seconds and MiB, the file bytes, the CPU.
HYPIC_BIN names the hypic binary (default build/hypic).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HYPIC_BIN = os.environ.get("HYPIC_BIN", os.path.join(REPO, "build", "hypic"))


def model_bytes(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path) if f.endswith(".safetensors"))


def one_run(path, dtype):
    """(seconds, peak RSS MiB) of one `hypic inspect --load` process."""
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
        os.execv(HYPIC_BIN, [HYPIC_BIN, "inspect", "--model", path, "--load", "--dtype", dtype])
    _, status, usage = os.wait4(pid, 0)
    secs = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"gguf_startup: `hypic inspect --load --model {path} --dtype {dtype}` failed "
                 f"(exit {os.waitstatus_to_exitcode(status)}); run it by hand to see why")
    return secs, usage.ru_maxrss / 1024.0  # KiB → MiB


def stats(xs):
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", help="NAME=PATH[:DTYPE] (DTYPE bf16 by default)")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per model")
    a = ap.parse_args()
    models = []
    for spec in a.models:
        name, _, rest = spec.partition("=")
        path, _, dtype = rest.rpartition(":") if rest.count(":") else (rest, "", "bf16")
        if not name or not os.path.exists(path):
            sys.exit(f"gguf_startup: '{spec}' is not NAME=PATH[:DTYPE] with an existing PATH")
        models.append((name, path, dtype or "bf16"))
    for name, path, dtype in models:  # untimed: the files into the page cache
        print(f"[gguf_startup] warming {name}", file=sys.stderr, flush=True)
        one_run(path, dtype)
    runs = {name: [] for name, _, _ in models}
    for r in range(a.runs):
        print(f"[gguf_startup] round {r + 1}/{a.runs}", file=sys.stderr, flush=True)
        for name, path, dtype in models:
            runs[name].append(one_run(path, dtype))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
    out = {"command": "hypic inspect --load", "runs": a.runs, "cpu": cpu, "nproc": os.cpu_count(),
           "date": time.strftime("%Y-%m-%d"), "models": {}}
    for name, path, dtype in models:
        out["models"][name] = {"path": path, "dtype": dtype, "file_bytes": model_bytes(path),
                               "seconds": stats([s for s, _ in runs[name]]),
                               "peak_rss_mib": stats([m for _, m in runs[name]])}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
