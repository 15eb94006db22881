"""What the golden tools print about the directories they wrote: tensor layouts (names with layer
numbers folded into patterns) and the per-model report. Dev-only; used by make_golden*.py."""
from __future__ import annotations

import os

from safetensors import safe_open


def tensor_layout(out_dir: str) -> list[tuple[str, str, list[int]]]:
    rows = []
    for fn in sorted(os.listdir(out_dir)):
        if fn.endswith(".safetensors") and fn.startswith("model"):
            with safe_open(os.path.join(out_dir, fn), framework="pt") as f:
                for k in f.keys():
                    sl = f.get_slice(k)
                    rows.append((k, sl.get_dtype(), list(sl.get_shape())))
    return sorted(rows)


def name_patterns(layout: list[tuple[str, str, list[int]]]) -> list[str]:
    """Distinct tensor-name patterns: layer index -> {L}, expert index -> {E}."""
    import re
    pats: dict[str, dict] = {}
    for k, dt, shape in layout:
        layers = re.findall(r"\.layers\.(\d+)\.", k)
        pat = re.sub(r"\.layers\.\d+\.", ".layers.{L}.", k)
        pat = re.sub(r"\.experts\.\d+\.", ".experts.{E}.", pat)
        e = pats.setdefault(pat, {"dtype": set(), "shape": set(), "layers": set(), "n": 0})
        e["dtype"].add(dt)
        e["shape"].add(tuple(shape))
        e["layers"].update(int(x) for x in layers)
        e["n"] += 1
    out = []
    for pat, e in sorted(pats.items()):
        lay = f" layers {sorted(e['layers'])}" if e["layers"] else ""
        out.append(f"{pat}  {'/'.join(sorted(e['dtype']))} {' '.join(str(list(x)) for x in sorted(e['shape']))}"
                   f"  x{e['n']}{lay}")
    return out


def print_layouts(results: list[dict]) -> None:
    """Each written model's tensor layout (name patterns, dtypes, shapes)."""
    for r in results:
        print(f"\n{r['name']} tensor layout:")
        for line in name_patterns(r["layout"]):
            print("   ", line)
    print()


def print_report(results: list[dict]) -> None:
    """Tensor layouts, then one line of figures per model (make_golden_lightning / _kda results)."""
    print_layouts(results)
    for r in results:
        print(f"{r['name']}: seed {r['seed']}, prompt {r['T']} tokens, min margin {r['min_margin']:.4f}, "
              f"bf16 dev {r['dev_bf16'][0]:.3f}-{r['dev_bf16'][1]:.3f} (w-rounded {r['dev_wround'][0]:.3f}-"
              f"{r['dev_wround'][1]:.3f}), margin/dev {r['robustness']:.2f}, decode-vs-prefill {r['dec_vs_prefill']:.3e}, "
              f"independent reference vs golden {max(r['ref']['prompt'], r['ref']['decode']):.3e}, "
              f"dir {r['size'] / 1e6:.2f} MB, tokenizer: {r['tokenizer']}")
