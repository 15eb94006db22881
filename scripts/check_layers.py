#!/usr/bin/env python3
"""Fails when a source file includes a header of a layer it may not use.

The layers of src/ (docs/ARCHITECTURE.md), lowest first; a layer may include its own
headers and those of the layers listed for it, nothing else:

  core -> kernels / tokenizer -> model -> cache -> engine -> cluster -> server -> router -> cli
  (bench, the benchmarks and the evaluation: on cluster, beside server; only cli uses it)

The generated protobuf headers (hypic_*.pb.h) belong to cluster. The C++ tests follow the
layer of their folder (tests/<layer>/), except tests/common, which any test may include.

Usage: scripts/check_layers.py [repo root]   (exit 1 and one line per violation)
"""
import pathlib
import re
import sys

ALLOWED = {
    "core": set(),
    "kernels": {"core"},
    "tokenizer": {"core"},
    "model": {"core", "kernels"},
    "cache": {"core", "kernels", "model"},
    "engine": {"core", "kernels", "tokenizer", "model", "cache"},
    "cluster": {"core", "kernels", "tokenizer", "model", "cache", "engine"},
    "server": {"core", "kernels", "tokenizer", "model", "cache", "engine", "cluster"},
    "router": {"core", "tokenizer", "server", "cluster"},
    "bench": {"core", "kernels", "tokenizer", "model", "cache", "engine", "cluster"},
    "cli": {"core", "kernels", "tokenizer", "model", "cache", "engine", "cluster", "server",
            "router", "bench"},
}
# The router holds no model: it may use the server's HTTP and API parts, never the model
# itself (model/, kernels/, cache/, engine/ headers).
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of_include(path: str):
    if re.fullmatch(r"hypic_\w+\.(grpc\.)?pb\.h", path):
        return "cluster"
    head = path.split("/", 1)[0]
    return head if head in ALLOWED else None


def check_file(f: pathlib.Path, layer: str, extra=frozenset()):
    bad = []
    text = f.read_text(encoding="utf-8", errors="replace")
    for n, line in enumerate(text.splitlines(), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        inc = layer_of_include(m.group(1))
        if inc is None or inc == layer or inc in ALLOWED[layer] or inc in extra:
            continue
        bad.append(f"{f}:{n}: {layer}/ includes {m.group(1)} ({inc}/ is not below {layer}/)")
    return bad


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    src = root / "src"
    bad = []
    seen = set()
    for d in sorted(p for p in src.iterdir() if p.is_dir()):
        if d.name not in ALLOWED:
            bad.append(f"{d}: folder is not a known layer; add it to scripts/check_layers.py "
                       "and docs/ARCHITECTURE.md")
            continue
        seen.add(d.name)
        for f in sorted(d.rglob("*")):
            if f.suffix in (".h", ".cpp"):
                bad += check_file(f, d.name)
    for missing in sorted(set(ALLOWED) - seen):
        bad.append(f"{src / missing}: layer folder missing")
    tests = root / "tests"
    for d in sorted(p for p in tests.iterdir() if p.is_dir() and p.name in ALLOWED):
        for f in sorted(d.rglob("*")):
            if f.suffix in (".h", ".cpp"):
                bad += check_file(f, d.name, extra={"common"})
    for line in bad:
        print(line)
    if bad:
        print(f"check_layers: {len(bad)} violation(s)")
        return 1
    print(f"check_layers: ok ({len(seen)} layers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
