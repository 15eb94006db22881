#!/usr/bin/env python3
"""PNG plots for docs/BENCHMARKS.md and docs/BENCHMARKS_SERVING.md from the benchmarks' JSON in bench/results/.

    python3 bench/plots.py [--results bench/results] [--out docs/img]

Developer tool (needs matplotlib: pip install matplotlib); CI does not run it. Each plot is
drawn from the JSON the benchmark printed, never from numbers typed in here, and shows one
CPU and one date, both in its title and file name (<tag> = cpu-tier: epyc-avx2, xeon-amx, …).
The CPU is what the JSON records (hypic's `system` / `hypic_system`, else llama.cpp's
`cpu_flags`, else the kernels that ran); a result that records none is left out, with a
warning. Per plot the latest date of that CPU is drawn; runs of one day are merged per weight
type, a later run (by the recorded hypic commit's time, then the file name) replacing an
earlier one.

  peer_llamacpp_<name>_<date>.json  (bench/peer_llamacpp.py: hypic against llama.cpp)
      → peer_llamacpp_<tag>.png (weights converted by each engine) and
        peer_llamacpp_gguf_<tag>.png (both engines on the same GGUF file): tokens/s per type,
        model and prompt length, and decode (medians, min–max as error bars)
  peer<N>_<model>[_<type>]_<isa>-<cpu>_<date>.json  (bench/peer_llamacpp.py --ik …, several
  prompt lengths; N ≥ 3 numbers the runs of a day)
      → peer3_<isa>-<cpu>.png: hypic, llama.cpp and ik_llama.cpp per type, model and prompt
        length, and decode
  decode_batch_<model>_<date>.jsonl  (hypic bench decode, one JSON line per type)
      → decode_batch_<model>_<tag>.png: decode tokens/s against the batch size, one line per type
  ttft_<model>_<date>.json  (hypic bench ttft)
      → ttft_<model>_<tag>.png: p50, p99 (and the cold first request's) time to first token
        per mode on the RAG trace
  scatter_<model>_<date>.json  (hypic bench scatter)
      → scatter_<model>_<tag>.png: cold TTFT against workers, measured and simulated per policy
  agent_turns_<model>_<date>.json  (bench/agent_turns.py)
      → agent_turns_<model>_<tag>.png: prefill time and tokens computed per turn, per engine
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit("plots.py: matplotlib is missing: pip install matplotlib")

DATE = re.compile(r"_(\d{4}-\d{2}-\d{2})\.jsonl?$")
# Words of result file names that name a CPU or tier, not the model.
CPU_WORDS = {"avx2", "avx512bf16", "xeon", "epyc", "q4t", "ftz"}


def save(fig, out, bottom=0.0):
    lines = fig._suptitle.get_text().count("\n") + 1 if fig._suptitle else 0
    fig.tight_layout(rect=(0, bottom, 1, 1 - 0.25 * lines / fig.get_figheight()))  # room for a suptitle / legend
    fig.savefig(out, dpi=110)
    plt.close(fig)


def file_date(f):
    m = DATE.search(f)
    return m.group(1) if m else "undated"


def run_cpu(r):
    """(tag, title) of the CPU a result was measured on, or None when it records none."""
    s = r.get("hypic_system") or r.get("system")
    if not s and isinstance(r.get("runs"), dict):
        s = next((v.get("hypic_system") for v in r["runs"].values() if v.get("hypic_system")), None)
    if s:
        vendor = "AMD EPYC" if "EPYC" in s["cpu"] else "Intel Xeon" if "Xeon" in s["cpu"] else s["cpu"]
        native, tier = s.get("cpu_tier", s["tier"]), s["tier"]
        title = f"{vendor} ({native}" + (f", capped to {tier})" if tier != native else ")")
        return f"{vendor.split()[-1].lower()}-{tier.replace('_', '')}", title
    flags = r.get("cpu_flags") or []
    kernels = json.dumps(r.get("rows", "")) + str(r.get("gemv_kernel", ""))
    if "amx_tile" in flags or "amx_" in kernels:  # AMX: Intel Xeon only
        return "xeon-amx", "Intel Xeon (AMX)"
    return None


def commit_time(r):
    """Commit time of the hypic build a result records (0 when it records none)."""
    c = (r.get("hypic_system") or r.get("system") or {}).get("commit")
    if not c:
        return 0
    out = subprocess.run(["git", "show", "-s", "--format=%ct", c], capture_output=True, text=True)
    return int(out.stdout.strip() or 0)


def latest_per_cpu(files, load=lambda f: json.load(open(f))):
    """{tag: (title, date, [(file, result)] of that date, oldest first)}; warns of results
    without a CPU."""
    by = {}
    for f in files:
        r = load(f)
        cpu = run_cpu(r)
        if not cpu:
            print(f"plots.py: {os.path.basename(f)} records no CPU: not plotted (re-run it)", file=sys.stderr)
            continue
        tag, title = cpu
        d = file_date(f)
        if tag not in by or d > by[tag][1]:
            by[tag] = (title, d, [])
        if d == by[tag][1]:
            by[tag][2].append((f, r))
    for runs in by.values():
        runs[2].sort(key=lambda fr: (commit_time(fr[1]), fr[0]))
    return by


def model_name(r, f, prefix):
    if "model" in r:
        return os.path.basename(os.path.normpath(r["model"]))
    words = os.path.basename(f)[len(prefix):].rsplit("_", 1)[0].replace("_", "-").split("-")
    return "-".join(w for w in words if w not in CPU_WORDS)


def prefill_cell(t, pp):
    """A type's prefill entry at prompt length pp (files of one length keep it unkeyed)."""
    p = t["prefill_tps"]
    return p.get(str(pp)) if str(pp) in p else (p if "hypic" in p else None)


def ratio(cell):
    return (cell.get("ratio_llama_cpp") or cell["ratio"])["median"]


def peer_plot(runs, out, title, date, same_file=False):
    models = {}  # model → {type: entry}, later runs replacing earlier ones per type
    pps = set()
    for _, r in runs:
        types = models.setdefault(os.path.basename(os.path.normpath(r["model"])), {})
        for t, e in r["types"].items():  # per type and prompt length: a run of fewer lengths keeps the others
            if same_file and not t.startswith("gguf-"):
                continue  # hypic's own quantization beside the files: not this plot's comparison
            old = types.get(t, {}).get("prefill_tps", {})
            keyed = all(k.isdigit() for k in e["prefill_tps"]) and all(k.isdigit() for k in old)
            types[t] = {**e, "prefill_tps": {**old, **e["prefill_tps"]}} if keyed else e
        pps.update(r["pp"] if isinstance(r["pp"], list) else [r["pp"]])
        tg = r["tg"]
    cols = [("prefill", pp) for pp in sorted(pps)] + [("decode", None)]
    fig, axes = plt.subplots(len(models), len(cols), figsize=(4.4 * len(cols), 3.2 * len(models)), squeeze=False)
    for row, model in enumerate(sorted(models)):
        types = models[model]
        for col, (what, pp) in enumerate(cols):
            ax = axes[row][col]
            cells = [(t, prefill_cell(e, pp) if pp else e["decode_tps"]) for t, e in types.items()]
            cells = [(t, c) for t, c in cells if c]
            for k, (engine, color) in enumerate((("hypic", "#1f77b4"), ("llama_cpp", "#ff7f0e"))):
                med = [c[engine]["median"] for _, c in cells]
                err = [[m - c[engine]["min"] for m, (_, c) in zip(med, cells)],
                       [c[engine]["max"] - m for m, (_, c) in zip(med, cells)]]
                ax.bar([i + (k - 0.5) * 0.38 for i in range(len(cells))], med, 0.38, yerr=err, color=color,
                       label="hypic" if engine == "hypic" else "llama.cpp")
            for i, (_, c) in enumerate(cells):
                top = max(c[e]["max"] for e in ("hypic", "llama_cpp"))
                ax.annotate(f"{ratio(c):.2f}×", (i, top), ha="center", va="bottom", fontsize=8)
            if not cells:
                ax.axis("off")
                ax.text(0.5, 0.5, f"{model}: pp{pp} not measured", ha="center", transform=ax.transAxes, fontsize=8)
                continue
            ax.set_xticks(range(len(cells)))
            ax.set_xticklabels([types[t]["peer_type"] if t.startswith("gguf-") else f"hypic {t} / {types[t]['peer_type']}"
                                if t.lower() != types[t]["peer_type"].lower() else t for t, _ in cells], fontsize=8)
            ax.set_title(f"{model}: " + (f"prefill pp{pp}" if pp else f"decode tg{tg}"), fontsize=9)
            ax.set_ylabel("tokens/s")
            ax.margins(y=0.18)
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=8)
    fig.suptitle(f"hypic against llama.cpp, {title}, {date}\n2 threads (labels: hypic / llama.cpp)", fontsize=10)
    save(fig, out, bottom=0.5 / (3.2 * len(models)))


ENGINES3 = (("hypic", "hypic", "#1f77b4"), ("llama_cpp", "llama.cpp", "#ff7f0e"),
            ("ik_llama_cpp", "ik_llama.cpp", "#2ca02c"))


def peer_run(f):
    """(model, isa-cpu, (date, N)) of a peer<N>_… file name, or None."""
    parts = os.path.basename(f)[:-len(".json")].split("_")
    if not parts[0][4:].isdigit() or int(parts[0][4:]) < 3:
        return None
    return parts[1], parts[-2], (parts[-1], int(parts[0][4:]))


def peer3_plot(files, out, label):
    cpu = run_cpu(json.load(open(files[0])))[1]
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
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=8)
    fig.suptitle(f"hypic against llama.cpp and ik_llama.cpp, {cpu}, {label}\nsame weights, 2 threads "
                 "(labels: hypic / llama.cpp, hypic / ik_llama.cpp)", fontsize=10)
    save(fig, out, bottom=0.5 / (3.3 * len(latest)))


def batch_plot(lines, out, cpu, date):
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for r in lines:
        label = r["dtype"] + (" (oneDNN)" if r.get("gemv") == "0" else "")
        kernel = r.get("gemv_kernel") or r["rows"][-1].get("gemv_kernel")  # per row in later runs
        if kernel:
            label += f" ({kernel}" + (", AMX off)" if r.get("amx") == "0" else ")")
        ax.plot([x["B"] for x in r["rows"]], [x["batched_tps"] for x in r["rows"]], marker="o",
                label=label)
    ax.set_xlabel("sequences decoded together (B)")
    ax.set_ylabel("tokens/s (all sequences)")
    ax.set_title(f"Batched decode, {os.path.basename(os.path.normpath(r['model']))}, prompt {r['prompt']} "
                 f"tokens\n{cpu}, {date}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, out)


def ttft_plot(r, out, model, cpu, date):
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
    ax.set_title(f"RAG trace, {model}" + (f": {base} / hypic p50 = {ratio:.1f}×" if ratio else "") +
                 f"\n{cpu}, {date}", fontsize=10)
    ax.legend()
    save(fig, out)


def scatter_plot(r, out, model, cpu, date):
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
                 f"{r['request']['segments']} segments\n{cpu}, {date}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save(fig, out)


def agent_turns_plot(r, out, model, cpu, date):
    colors = {"hypic-prefix": "#1f77b4", "hypic-hypic": "#2ca02c", "llama-server": "#d62728",
              "llama-server-1slot": "#ff7f0e"}
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, e in r["engines"].items():
        turns = e["summary"]["per_turn"]
        xs = [t["turn"] + 1 for t in turns]
        a1.plot(xs, [t["prefill_ms"] / 1000 for t in turns], "o-", ms=3, color=colors.get(name), label=name)
        a2.plot(xs, [t["recomputed"] for t in turns], "o-", ms=3, color=colors.get(name), label=name)
    first = next(iter(r["engines"].values()))["summary"]["per_turn"]
    a2.plot([t["turn"] + 1 for t in first], [t["new_tokens"] for t in first], "k--", lw=1,
            label="unavoidable (after the longest prefix seen)")
    a1.set_ylabel("prefill per request (s, server's)")
    a2.set_ylabel("tokens run through the model per request")
    for ax in (a1, a2):
        ax.set_xlabel("turn")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    a2.legend(fontsize=7)
    fig.suptitle(f"{r['sessions']} interleaved agent sessions, {r['turns']} turns, {r['tools']} tools, reasoning on "
                 f"(Qwen3.5 template), {model} {r['dtype']}\n{cpu}, {date}", fontsize=10)
    save(fig, out)


def jsonl(path):
    """A .jsonl file's objects as one result: its lines, and the first's fields."""
    lines = [json.loads(x) for x in open(path) if x.strip()]
    return {**lines[0], "lines": lines}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "docs", "img"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    made = []
    peers = glob.glob(os.path.join(a.results, "peer_llamacpp_*.json"))
    for gguf in (False, True):
        files = [f for f in peers if ("_gguf_" in os.path.basename(f)) == gguf]
        for tag, (title, date, runs) in sorted(latest_per_cpu(files).items()):
            made.append(os.path.join(a.out, f"peer_llamacpp{'_gguf' if gguf else ''}_{tag}.png"))
            peer_plot(runs, made[-1], title + (", both engines on the same GGUF files" if gguf else ""), date, gguf)
    by_isa = {}  # "<isa>-<cpu>" → files
    for f in glob.glob(os.path.join(a.results, "peer[0-9]*_*.json")):
        if peer_run(f):
            by_isa.setdefault(peer_run(f)[1], []).append(f)
    for isa, files in sorted(by_isa.items()):
        made.append(os.path.join(a.out, f"peer3_{isa}.png"))
        peer3_plot(files, made[-1], "AVX2 tier (every engine capped to AVX2)" if isa.startswith("avx2")
                   else "native AVX-512 tier")
    kinds = (("decode_batch", "jsonl", lambda runs, out, m, cpu, d: batch_plot(runs[-1][1]["lines"], out, cpu, d)),
             ("ttft", "json", lambda runs, out, m, cpu, d: ttft_plot(runs[-1][1], out, m, cpu, d)),
             ("scatter", "json", lambda runs, out, m, cpu, d: scatter_plot(runs[-1][1], out, m, cpu, d)),
             ("agent_turns", "json", lambda runs, out, m, cpu, d: agent_turns_plot(runs[-1][1], out, m, cpu, d)))
    for kind, ext, plot in kinds:
        by_model = {}
        for f in glob.glob(os.path.join(a.results, f"{kind}_*.{ext}")):
            r = jsonl(f) if ext == "jsonl" else json.load(open(f))
            model = (os.path.basename(f)[len(kind) + 1:].rsplit("_", 1)[0] if kind == "decode_batch"
                     else model_name(r, f, kind + "_"))
            by_model.setdefault(model, []).append(f)
        for model, files in sorted(by_model.items()):
            load = jsonl if ext == "jsonl" else (lambda f: json.load(open(f)))
            for tag, (title, date, runs) in sorted(latest_per_cpu(files, load).items()):
                made.append(os.path.join(a.out, f"{kind}_{model}_{tag}.png"))
                plot(runs, made[-1], model, title, date)
    if not made:
        sys.exit(f"plots.py: no benchmark JSON in {a.results}")
    for m in made:
        print(m)


if __name__ == "__main__":
    main()
