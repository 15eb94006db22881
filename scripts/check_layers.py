#!/usr/bin/env python3
"""Fails when a source file includes a header of a layer it may not use, or when the router
library links (directly or through another library) a library of the model.

The layers of src/ (docs/ARCHITECTURE.md), lowest first; a layer may include its own
headers and those of the layers listed for it, nothing else:

  core -> kernels / tokenizer / grammar / api / rpc / kv / checkpoint -> entry -> model -> cache
       -> engine -> cluster -> server -> bench -> cli;  model -> synthetic -> cli;
       core / api / rpc / kv -> router -> cli
  (api: the HTTP front and the OpenAI API, on core and tokenizer; the router includes api,
  rpc, kv and core, never the server or the model; rpc: the cluster's gRPC credentials, kv: the Redis client, both
  on core alone; checkpoint: checkpoint files, on core; entry: the segment-entry format, on
  kernels and checkpoint; bench, the benchmarks and the evaluation, and synthetic, the
  benchmarks' checkpoints, only cli uses; bench may use server: the tool eval goes through
  the server's request path)

The generated protobuf headers (hypic_*.pb.h) form the pseudo-layer "proto" (the hypic_proto
library, no folder). The C++ tests follow the layer of their folder (tests/<layer>/), except
tests/common, which any test may include. Links are read from CMakeLists.txt
(hypic_layer(NAME DIR DEPS...) and target_link_libraries(NAME ... DEPS...)).

Usage: scripts/check_layers.py [repo root]   (exit 1 and one line per violation)
"""
import pathlib
import re
import sys

ALLOWED = {
    "core": set(),
    "kernels": {"core"},
    "tokenizer": {"core"},
    "grammar": {"core"},
    "api": {"core", "tokenizer", "grammar", "proto"},
    "rpc": {"core"},
    "kv": {"core"},
    # Checkpoint files (safetensors, shards, stored quantization, FP8, quantize) and the
    # segment-entry format, below the model that reads and fills them.
    "checkpoint": {"core"},
    "entry": {"core", "kernels", "checkpoint"},
    "model": {"core", "kernels", "checkpoint", "entry"},
    "cache": {"core", "kernels", "checkpoint", "entry", "model", "kv"},
    "engine": {"core", "grammar", "kernels", "tokenizer", "checkpoint", "entry", "model", "cache"},
    "cluster": {"core", "grammar", "kernels", "tokenizer", "checkpoint", "entry", "model", "cache", "engine",
                "rpc", "proto"},
    "server": {"core", "grammar", "kernels", "tokenizer", "api", "checkpoint", "entry", "model", "cache",
               "engine", "cluster", "rpc", "kv", "proto"},
    # The router holds no model: the HTTP front and the API, the cluster credentials, the
    # shared registry and the generated stubs only.
    "router": {"core", "api", "rpc", "kv", "proto"},
    "bench": {"core", "grammar", "kernels", "tokenizer", "api", "checkpoint", "entry", "model", "cache", "engine",
              "cluster", "server", "rpc", "kv", "proto"},
    # Synthetic checkpoints for the benchmarks: written with the checkpoint layer, checked
    # with the model's loader; only cli uses them.
    "synthetic": {"core", "kernels", "checkpoint", "model"},
    "cli": {"core", "grammar", "kernels", "tokenizer", "api", "checkpoint", "entry", "model", "cache",
            "engine", "cluster", "server", "router", "bench", "synthetic", "rpc", "kv", "proto"},
}
PSEUDO = {"proto"}  # layers without a folder
# Libraries the router may not link: everything that holds or runs the model.
MODEL_LIBS = {"hypic_kernels", "hypic_checkpoint", "hypic_entry", "hypic_model", "hypic_synthetic", "hypic_cache", "hypic_engine", "hypic_cluster",
              "hypic_server", "hypic_bench"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of_include(path: str):
    if re.fullmatch(r"hypic_\w+\.(grpc\.)?pb\.h", path):
        return "proto"
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


def link_graph(cmake: pathlib.Path):
    """NAME -> the libraries it links, from hypic_layer() and target_link_libraries()."""
    text = re.sub(r"#[^\n]*", "", cmake.read_text(encoding="utf-8", errors="replace"))
    graph = {}
    for m in re.finditer(r"hypic_layer\(\s*(\w+)\s+\w+([^)]*)\)", text):
        graph.setdefault(m.group(1), set()).update(m.group(2).split())
    for m in re.finditer(r"target_link_libraries\(\s*(\w+)([^)]*)\)", text):
        deps = [d for d in m.group(2).split() if d not in ("PUBLIC", "PRIVATE", "INTERFACE")]
        graph.setdefault(m.group(1), set()).update(deps)
    return graph


def check_links(cmake: pathlib.Path):
    if not cmake.exists():
        return []
    graph = link_graph(cmake)
    if "hypic_router" not in graph:
        return [f"{cmake}: no hypic_layer(hypic_router ...) found"]
    # Breadth-first from the router, remembering how each library was reached.
    via = {"hypic_router": None}
    todo = ["hypic_router"]
    while todo:
        lib = todo.pop(0)
        for dep in sorted(graph.get(lib, ())):
            if dep not in via:
                via[dep] = lib
                todo.append(dep)
    bad = []
    for lib in sorted(MODEL_LIBS & set(via)):
        path = [lib]
        while via[path[-1]] is not None:
            path.append(via[path[-1]])
        bad.append(f"{cmake}: hypic_router links {lib} ({' -> '.join(reversed(path))}); the "
                   "router may link only the api, tokenizer, core and proto libraries")
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
    for missing in sorted(set(ALLOWED) - seen - PSEUDO):
        bad.append(f"{src / missing}: layer folder missing")
    tests = root / "tests"
    for d in sorted(p for p in tests.iterdir() if p.is_dir() and p.name in ALLOWED):
        for f in sorted(d.rglob("*")):
            if f.suffix in (".h", ".cpp"):
                bad += check_file(f, d.name, extra={"common"})
    bad += check_links(root / "CMakeLists.txt")
    for line in bad:
        print(line)
    if bad:
        print(f"check_layers: {len(bad)} violation(s)")
        return 1
    print(f"check_layers: ok ({len(seen)} layers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
