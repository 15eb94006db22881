#!/usr/bin/env python3
"""PNG plots for docs/BENCHMARKS.md and docs/BENCHMARKS_SERVING.md from the benchmarks' JSON in bench/results/.

    python3 bench/plots.py [--results bench/results] [--out docs/img]

Developer tool (needs matplotlib: pip install matplotlib); CI does not run it. Each plot is
drawn from the JSON the benchmark printed, never from numbers typed in here:

  peer_llamacpp_<model>_<date>.json  (bench/peer_llamacpp.py, one prompt length, two engines)
      → peer_llamacpp.png: prefill and decode tokens/s of hypic and llama.cpp per type and
        model (medians, min–max as error bars); per model and CPU the latest date only
  peer<N>_<model>[_<type>]_<isa>-<cpu>_<date>.json  (bench/peer_llamacpp.py --ik …, several
  prompt lengths; N ≥ 3 numbers the runs of a day)
      → peer3_<isa>-<cpu>.png: hypic, llama.cpp and ik_llama.cpp per type, model and prompt
        length, and decode; one figure per ISA and CPU, per model and type the latest run
  decode_batch_<model>_<date>.jsonl  (hypic bench decode, one JSON line per type)
      → decode_batch_<model>.png: decode tokens/s against the batch size, one line per type
  ttft_<model>_<date>.json  (hypic bench ttft)
      → ttft_<model>.png: p50, p99 (and the cold first request's) time to first token per
        mode on the RAG trace
  scatter_<model>_<date>.json  (hypic bench scatter)
      → scatter_<model>.png: cold TTFT against workers, measured and simulated per policy
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


def save(fig, out):
    fig.tight_layout(rect=(0, 0, 1, 0.985) if fig._suptitle else None)  # room for a suptitle
    fig.savefig(out, dpi=110)
    plt.close(fig)


def peer_plot(files, out):
    latest = {}  # (model, cpu) → (date, file name, JSON)
    for f in sorted(files):
        r = json.load(open(f))
        cpu = "Xeon, AMX" if "amx_int8" in r.get("cpu_flags", []) else "EPYC, no AMX"
        key = (os.path.basename(os.path.normpath(r["model"])), cpu)
        date = os.path.basename(f).rsplit("_", 1)[-1]
        if key not in latest or (date, f) > latest[key][:2]:
            latest[key] = (date, f, r)
    runs = [(f"{model} ({cpu}, {latest[(model, cpu)][0][:-5]})", latest[(model, cpu)][2])
            for model, cpu in sorted(latest)]
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
    save(fig, out)


ENGINES3 = (("hypic", "hypic", "#1f77b4"), ("llama_cpp", "llama.cpp", "#ff7f0e"),
            ("ik_llama_cpp", "ik_llama.cpp", "#2ca02c"))


def peer_run(f):
    """(model, isa-cpu, (date, N)) of a peer<N>_… file name, or None."""
    parts = os.path.basename(f)[:-len(".json")].split("_")
    if not parts[0][4:].isdigit() or int(parts[0][4:]) < 3:
        return None
    return parts[1], parts[-2], (parts[-1], int(parts[0][4:]))


def peer3_plot(files, out, label):
    latest = {}  # model → (date, JSON whose types are each type's latest run)
    for f in sorted(files, key=lambda f: peer_run(f)[2]):  # oldest first: later runs replace
        model, _, (date, _) = peer_run(f)
        r = json.load(open(f))
        if model in latest:
            merged = latest[model][1]
            merged["types"].update(r["types"])
            r = merged
        latest[model] = (date, r)
    cols = [("prefill_tps", str(pp)) for pp in next(iter(latest.values()))[1]["pp"]] + [("decode_tps", None)]
    fig, axes = plt.subplots(len(latest), len(cols), figsize=(4.2 * len(cols), 3.3 * len(latest)), squeeze=False)
    for row, model in enumerate(sorted(latest)):
        date, r = latest[model]
        types = list(r["types"])
        for col, (key, pp) in enumerate(cols):
            ax = axes[row][col]
            cell = lambda t: r["types"][t][key][pp] if pp else r["types"][t][key]  # noqa: E731
            for k, (engine, name, color) in enumerate(ENGINES3):
                med = [cell(t)[engine]["median"] for t in types]
                err = [[m - cell(t)[engine]["min"] for m, t in zip(med, types)],
                       [cell(t)[engine]["max"] - m for m, t in zip(med, types)]]
                ax.bar([i + (k - 1) * 0.27 for i in range(len(types))], med, 0.27, yerr=err, color=color, label=name)
            for i, t in enumerate(types):
                top = max(cell(t)[e]["max"] for e, _, _ in ENGINES3)
                ax.annotate("%.2f× / %.2f×" % (cell(t)["ratio_llama_cpp"]["median"], cell(t)["ratio_ik_llama_cpp"]["median"]),
                            (i, top), ha="center", va="bottom", fontsize=7)
            ax.set_xticks(range(len(types)))
            ax.set_xticklabels([f"{t} / {r['types'][t]['peer_type']}" for t in types])
            ax.set_title(f"{model} ({date}): " + (f"prefill pp{pp}" if pp else f"decode tg{r['tg']}"), fontsize=9)
            ax.set_ylabel("tokens/s")
            ax.margins(y=0.15)
            if row == 0 and col == 0:
                ax.legend(fontsize=7, loc="lower left")
    fig.suptitle(f"{label}: hypic against llama.cpp and ik_llama.cpp, same weights, 2 threads "
                 "(labels: hypic / llama.cpp, hypic / ik_llama.cpp)", fontsize=10)
    save(fig, out)


def batch_plot(path, out):
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for line in open(path):
        r = json.loads(line)
        label = r["dtype"] + (" (oneDNN, before)" if r.get("gemv") == "0" else "")
        kernel = r.get("gemv_kernel") or r["rows"][-1].get("gemv_kernel")  # per row since 12-05
        if kernel:
            label += f" ({kernel})"
        ax.plot([x["B"] for x in r["rows"]], [x["batched_tps"] for x in r["rows"]], marker="o",
                label=label)
    ax.set_xlabel("sequences decoded together (B)")
    ax.set_ylabel("tokens/s (all sequences)")
    ax.set_title(f"Batched decode, {os.path.basename(os.path.normpath(r['model']))}, "
                 f"prompt {r['prompt']} tokens")
    ax.grid(alpha=0.3)
    ax.legend()
    save(fig, out)


def ttft_plot(path, out, model):
    r = json.load(open(path))
    order = ["full", "prefix", "hypic", "naive"]
    modes = sorted(r["modes"], key=lambda m: order.index(m) if m in order else len(order))
    fig, ax = plt.subplots(figsize=(6.5, 4))
    keys = [("p50_ttft_ms", "#1f77b4"), ("p99_ttft_ms", "#aec7e8")]
    if all("cold_ttft_ms" in r["modes"][m] for m in modes):  # the first request (since 12-06)
        keys.append(("cold_ttft_ms", "#7f7f7f"))
    width = 0.76 / len(keys)
    for k, (key, color) in enumerate(keys):
        vals = [r["modes"][m][key] / 1000 for m in modes]
        xs = [i + (k - (len(keys) - 1) / 2) * width for i in range(len(modes))]
        ax.bar(xs, vals, width, color=color, label=key.split("_")[0])
        for x, v in zip(xs, vals):
            ax.annotate(f"{v:.2f} s", (x, v), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(modes)))
    ax.set_xticklabels([f"{m}\nhits {100 * r['modes'][m]['segment_hit_rate']:.0f} %"
                        if m in ("hypic", "naive") else m for m in modes])
    ax.set_yscale("log")
    ax.set_ylabel("time to first token (s, log scale)")
    base = "prefix" if "ratio_p50_prefix_over_hypic" in r else "full"
    ratio = r.get(f"ratio_p50_{base}_over_hypic")
    ax.set_title(f"RAG trace, {model}" + (f": {base} / hypic p50 = {ratio:.1f}×" if ratio else ""))
    ax.legend()
    save(fig, out)


def scatter_plot(path, out, model):
    r = json.load(open(path))
    proj = r["projection"]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    policies = sorted((k for k, v in proj.items() if isinstance(v, list) and k != "equal_lengths_lpt"),
                      key=lambda k: k != "lpt")
    for pol, color in zip(policies, ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")):
        ax.plot([x["workers"] for x in proj[pol]], [x["ttft_s"] for x in proj[pol]], color=color,
                label=f"{pol}, simulated")
        # measured: the overlapped composition (what `hypic serve` runs); 1 worker is any policy
        pts = [m for m in r["measured"]
               if m["policy"] in (pol, "any") and m.get("compose", "overlap") == "overlap"]
        ax.plot([m["workers"] for m in pts], [m["ttft_median_s"] for m in pts], "o", color=color,
                label=f"{pol}, measured")
    eq = proj.get("equal_lengths_lpt")
    if eq:
        ax.plot([x["workers"] for x in eq], [x["ttft_s"] for x in eq], "--", color="gray",
                label="lpt, equal segment lengths, simulated")
    for b in r.get("single_instance", []):
        ax.axhline(b["ttft_median_s"], color="black", lw=0.8, ls=":")
        ax.annotate(f"single instance, {b['mode']}, {b['threads']} thread(s)",
                    (ax.get_xlim()[1], b["ttft_median_s"]), ha="right", va="bottom", fontsize=7)
    ax.set_xlabel("segment workers (one core each)")
    ax.set_ylabel("cold time to first token (s)")
    ax.set_title(f"{model}: cold TTFT of one {r['request']['tokens']}-token request, "
                 f"{r['request']['segments']} segments")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save(fig, out)


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
    by_isa = {}  # "<isa>-<cpu>" → files
    for f in glob.glob(os.path.join(a.results, "peer[0-9]*_*.json")):
        if peer_run(f):
            by_isa.setdefault(peer_run(f)[1], []).append(f)
    for isa, files in sorted(by_isa.items()):
        made.append(os.path.join(a.out, f"peer3_{isa}.png"))
        cpu = "Xeon without AMX" if "xeon" in isa else isa
        peer3_plot(files, made[-1], ("AVX2 tier (every engine capped to AVX2)" if isa.startswith("avx2")
                                     else "native AVX-512 tier") + f", {cpu}")
    for f in sorted(glob.glob(os.path.join(a.results, "decode_batch_*.jsonl"))):
        model = os.path.basename(f)[len("decode_batch_"):].rsplit("_", 1)[0]
        made.append(os.path.join(a.out, f"decode_batch_{model}.png"))
        batch_plot(f, made[-1])
    for kind, fn in (("ttft", ttft_plot), ("scatter", scatter_plot)):
        for f in sorted(glob.glob(os.path.join(a.results, f"{kind}_*.json"))):
            model = os.path.basename(f)[len(kind) + 1:].rsplit("_", 1)[0]
            made.append(os.path.join(a.out, f"{kind}_{model}.png"))
            fn(f, made[-1], model)
    if not made:
        sys.exit(f"plots.py: no benchmark JSON in {a.results}")
    for m in made:
        print(m)


if __name__ == "__main__":
    main()
