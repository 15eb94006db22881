#!/usr/bin/env python3
"""PNG plots for docs/BENCHMARKS.md from the benchmarks' JSON in bench/results/.

    python3 bench/plots.py [--results bench/results] [--out docs/img]

Developer tool (needs matplotlib: pip install matplotlib); CI does not run it. Each plot is
drawn from the JSON the benchmark printed, never from numbers typed in here:

  peer_llamacpp_<model>_<date>.json  (bench/peer_llamacpp.py)
      → peer_llamacpp.png: prefill and decode tokens/s of hypic and llama.cpp per type and
        model (medians, min–max as error bars)
  decode_batch_<model>_<date>.jsonl  (DecodeBatchBench, one JSON line per type)
      → decode_batch_<model>.png: decode tokens/s against the batch size, one line per type
"""
import argparse
import glob
import json
import os
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("plots.py: matplotlib is missing: pip install matplotlib")


def peer_plot(files, out):
    runs = []
    for f in sorted(files):
        r = json.load(open(f))
        runs.append((os.path.basename(os.path.normpath(r["model"])), r))
    fig, axes = plt.subplots(len(runs), 2, figsize=(10, 3.2 * len(runs)), squeeze=False)
    for row, (name, r) in enumerate(runs):
        types = list(r["types"])
        for col, key in enumerate(("prefill_tps", "decode_tps")):
            ax = axes[row][col]
            for k, (engine, color) in enumerate((("hypic", "#1f77b4"), ("llama_cpp", "#ff7f0e"))):
                med = [r["types"][t][key][engine]["median"] for t in types]
                lo = [m - r["types"][t][key][engine]["min"] for m, t in zip(med, types)]
                hi = [r["types"][t][key][engine]["max"] - m for m, t in zip(med, types)]
                xs = [i + (k - 0.5) * 0.38 for i in range(len(types))]
                ax.bar(xs, med, 0.38, yerr=[lo, hi], color=color,
                       label="hypic" if engine == "hypic" else "llama.cpp")
            ax.set_xticks(range(len(types)))
            ax.set_xticklabels([f"{t} / {r['types'][t]['peer_type']}" for t in types])
            what = f"prefill pp{r['pp']}" if key == "prefill_tps" else f"decode tg{r['tg']}"
            ax.set_title(f"{name}: {what}")
            ax.set_ylabel("tokens/s")
            for i, t in enumerate(types):
                ratio = r["types"][t][key]["ratio"]["median"]
                top = max(r["types"][t][key][e]["max"] for e in ("hypic", "llama_cpp"))
                ax.annotate(f"{ratio:.2f}×", (i, top), ha="center", va="bottom", fontsize=8)
            if row == 0 and col == 0:
                ax.legend()
    fig.suptitle("hypic against llama.cpp, same weights, 2 threads (ratio = hypic / llama.cpp)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def batch_plot(path, out):
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for line in open(path):
        r = json.loads(line)
        label = r["dtype"] + (" (oneDNN, before)" if r.get("gemv") == "0" else "")
        ax.plot([x["B"] for x in r["rows"]], [x["batched_tps"] for x in r["rows"]], marker="o",
                label=label)
    ax.set_xlabel("sequences decoded together (B)")
    ax.set_ylabel("tokens/s (all sequences)")
    ax.set_title(f"Batched decode, {os.path.basename(os.path.normpath(r['model']))}, "
                 f"prompt {r['prompt']} tokens")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs", "img"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    made = []
    peers = glob.glob(os.path.join(a.results, "peer_llamacpp_*.json"))
    if peers:
        made.append(os.path.join(a.out, "peer_llamacpp.png"))
        peer_plot(peers, made[-1])
    for f in sorted(glob.glob(os.path.join(a.results, "decode_batch_*.jsonl"))):
        model = os.path.basename(f)[len("decode_batch_"):].rsplit("_", 1)[0]
        made.append(os.path.join(a.out, f"decode_batch_{model}.png"))
        batch_plot(f, made[-1])
    if not made:
        sys.exit(f"plots.py: no benchmark JSON in {a.results}")
    for m in made:
        print(m)


if __name__ == "__main__":
    main()
