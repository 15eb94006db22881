#!/usr/bin/env python3
"""Converts hypic's golden test checkpoints (tests/models/*) to GGUF with llama.cpp's own
converter, so that the GGUF loader is tested against exactly what llama.cpp users download.

Developer tool (needs torch; never run in CI). The outputs are committed under
tests/data/gguf/models/ (F32: the loader's transforms are exact there; the quantised types
are written from these by the test itself with gguf-py, tests/model/gguf_variants.py).

    pip download --no-binary :all: --no-deps llama-cpp-python==0.3.36   # vendors llama.cpp
    tar xzf llama_cpp_python-0.3.36.tar.gz
    /opt/hypic-dev/bin/python tools/convert_test_models_gguf.py \
        --llama-cpp llama_cpp_python-0.3.36/vendor/llama.cpp \
        [--llama-quantize BUILD/bin/llama-quantize]

With --checkpoint DIR --outfile FILE it converts one checkpoint instead (bench/peer_llamacpp.py
does so for the families it does not write itself, e.g. `hypic bench make-model --shape
kimi-linear-48b-a3b` with the test tokenizer: BF16 by default).

With --llama-quantize (a llama.cpp build of the same source, e.g. the one bench/peer_llamacpp.py
makes in its cache) it also writes hypic_tiny.q4_k_m.gguf: the embedded model (models/hypic-tiny,
hidden 256: whole K-quant super-blocks, which the goldens' hidden 64 cannot hold) converted to
F32 and quantized to Q4_K_M by llama-quantize (Q4_K and Q6_K tensors, as users' files mix them).

The test checkpoints' tokenizers are tiny trained BPEs whose pre-tokenizer hash is not in
llama.cpp's table (`get_vocab_base_pre` raises for them), so the converter is run with that
one method answering the family's `pre` name (what it answers for the real checkpoints);
everything else is llama.cpp's code unchanged.

Kimi-Linear's vocabulary comes from its remote-code tokenizer (tokenization_kimi.py, which the
converter loads with trust_remote_code to rebuild the BPE merges from the tiktoken ranks); the
test checkpoint ships its tiktoken.model without that code, so for it the converter's tiktoken
path is given an object with the three attributes it reads (`model._mergeable_ranks`,
`special_tokens`, `eos_id`) made from tiktoken.model and tokenizer_config.json — the merges,
tokens and types are then llama.cpp's own code's output. (Left alone, its first try through
transformers' generic loader succeeds without merges: a file llama.cpp itself would refuse.)

One key is added after conversion: KimiLinearModel does not write num_expert_group (the
released Kimi-Linear has 1), which the kimi_linear_moe checkpoint sets to 4 (topk_group 2);
the file gets it as `kimi-linear.expert_group_count`, the key llama.cpp's loader reads for
every architecture, so that the file describes the golden model.
"""
import argparse
import json
import pathlib
import runpy
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent

# test checkpoint -> the `tokenizer.ggml.pre` llama.cpp writes for the real model
MODELS = {
    "qwen3_5_dense": "qwen35",
    "qwen3_5_moe": "qwen35",
    "qwen3_next_moe": "qwen2",
    "kimi_linear_moe": "kimi-k2",
    "minimax_rotary": "minimax-m2",
    "ling3_hybrid": "bailingmoe2",
}
# model_type prefix -> the pre name of --checkpoint's conversion
PRE_BY_MODEL_TYPE = {"qwen3_5": "qwen35", "qwen3_next": "qwen2", "kimi_linear": "kimi-k2",
                     "minimax": "minimax-m2", "bailing_hybrid": "bailingmoe2"}
EMBEDDED = ("hypic_tiny", ROOT / "models/hypic-tiny", "qwen35")
# test checkpoint -> {metadata key: config.json field} the converter leaves out (see above)
ADDED_KEYS = {
    "kimi_linear_moe": {"kimi-linear.expert_group_count": lambda c: int(c["num_expert_group"])},
    "minimax_rotary": {"minimax-01.attention.recurrent_layers": lambda c: [t == 0 for t in c["attn_type_list"]]},
}


def add_keys(path, keys):
    """Rewrites the GGUF at `path` with the metadata `keys` added (gguf-py): an int as uint32, a
    list as an array of its elements' type."""
    import gguf
    r = gguf.GGUFReader(str(path))
    tmp = path.with_suffix(".tmp")
    w = gguf.GGUFWriter(str(tmp), r.fields["general.architecture"].contents())
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        sub = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(f.name, f.contents(), f.types[0], sub_type=sub)
    for k, v in keys.items():
        if isinstance(v, list):
            w.add_array(k, v)
        else:
            w.add_uint32(k, int(v))
    for t in r.tensors:
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(path)


def minimax_index(d):
    """MiniMaxText01Model reads the embedding's shard from model.safetensors.index.json (to find
    zero rows of added tokens); the test checkpoint is one unindexed model.safetensors."""
    from safetensors import safe_open
    with safe_open(str(d / "model.safetensors"), "pt") as f:
        names = list(f.keys())
    json.dump({"metadata": {}, "weight_map": {n: "model.safetensors" for n in names}},
              open(d / "model.safetensors.index.json", "w"))


def ling3_released_config(d):
    """The golden Ling-3.0 checkpoint's config as transformers saves it (BailingHybridForCausalLM,
    linear_* keys) rewritten in the released format BailingMoeV3Model reads: KDA head_dim, the
    three switches it requires, the shared expert width, norm_topk_prob, n_group and the router's
    score function. The tensors are already under the released names."""
    c = json.load(open(d / "config.json"))
    c.update(architectures=["BailingMoeV3ForCausalLM"], model_type="bailing_moe_v3", head_dim=c["linear_head_dim"], no_kda_lora=True,
             gated_attention_proj_granularity_type="head_wise",
             moe_shared_expert_intermediate_size=c["moe_intermediate_size"] * c["num_shared_experts"],
             norm_topk_prob=c["moe_renormalize"], n_group=c["num_expert_group"], score_function="sigmoid")
    json.dump(c, open(d / "config.json", "w"), indent=2)


# test checkpoint -> what its copy needs before llama.cpp's converter takes it (see above)
STAGED = {"minimax_rotary": minimax_index, "ling3_hybrid": ling3_released_config}


def stage(name, tmp):
    """The checkpoint the converter reads: tests/models/NAME, or a staged copy of it in tmp."""
    src = ROOT / "tests/models" / name
    if name not in STAGED:
        return src
    dst = tmp / name
    shutil.copytree(src, dst)
    STAGED[name](dst)
    return dst


class KimiTokenizerShim:
    """What KimiLinearModel.set_vocab's tiktoken path reads of tokenization_kimi's tokenizer."""

    def __init__(self, d):
        import base64
        ranks = {}
        for line in open(d / "tiktoken.model", "rb"):
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
        cfg = json.load(open(d / "tokenizer_config.json"))
        self.model = type("M", (), {"_mergeable_ranks": ranks})()
        self.special_tokens = {v["content"]: int(k) for k, v in cfg["added_tokens_decoder"].items()}
        self.eos_id = self.special_tokens[cfg["eos_token"]]


def kimi_vocab_via_tiktoken(src):
    """Sends KimiLinearModel.set_vocab down its tiktoken path with KimiTokenizerShim."""
    import transformers
    from conversion import kimi_linear

    def no_gpt2(self):
        raise RuntimeError("the tiktoken path")
    kimi_linear.KimiLinearModel._set_vocab_gpt2 = no_gpt2
    transformers.AutoTokenizer.from_pretrained = staticmethod(lambda *a, **k: KimiTokenizerShim(src))


def convert(script, base, src, pre, out, *extra, outtype="f32"):
    """llama.cpp's convert_hf_to_gguf.py on checkpoint `src`, get_vocab_base_pre → pre."""
    base.TextModel.get_vocab_base_pre = lambda self, tokenizer, pre=pre: pre
    sys.argv = [str(script), str(src), "--outtype", outtype, "--outfile", str(out), *extra]
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            sys.exit(f"converting {src} failed ({e.code})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", required=True, type=pathlib.Path,
                    help="llama.cpp source tree (holds convert_hf_to_gguf.py)")
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "tests/data/gguf/models")
    ap.add_argument("--llama-quantize", type=pathlib.Path,
                    help="llama.cpp's llama-quantize: also write hypic_tiny.q4_k_m.gguf")
    ap.add_argument("--checkpoint", type=pathlib.Path,
                    help="convert this checkpoint instead (e.g. one of `hypic bench make-model`, for "
                         "bench/peer_llamacpp.py) to --outfile")
    ap.add_argument("--outfile", type=pathlib.Path, help="with --checkpoint: the GGUF to write")
    ap.add_argument("--outtype", default="bf16", help="with --checkpoint: the converter's --outtype")
    ap.add_argument("models", nargs="*", default=list(MODELS), help="test checkpoints to convert")
    a = ap.parse_args()
    if a.checkpoint and not a.outfile:
        ap.error("--checkpoint needs --outfile")
    script = a.llama_cpp / "convert_hf_to_gguf.py"
    if not script.is_file():
        sys.exit(f"{script} not found: pass the llama.cpp source tree")
    sys.path.insert(0, str(a.llama_cpp))
    sys.path.insert(1, str(a.llama_cpp / "gguf-py"))
    from conversion import base  # llama.cpp's converter classes

    if a.checkpoint:
        model_type = json.load(open(a.checkpoint / "config.json")).get("model_type", "")
        pre = next((p for t, p in PRE_BY_MODEL_TYPE.items() if model_type.startswith(t)), None)
        if pre is None:
            sys.exit(f"{a.checkpoint}: model_type {model_type!r} has no known tokenizer.ggml.pre")
        if model_type == "kimi_linear":
            kimi_vocab_via_tiktoken(a.checkpoint)
        convert(script, base, a.checkpoint, pre, a.outfile, outtype=a.outtype)
        return
    a.out.mkdir(parents=True, exist_ok=True)
    for name in a.models:
        out = a.out / f"{name}.f32.gguf"
        if name.startswith("kimi_linear"):
            kimi_vocab_via_tiktoken(ROOT / "tests/models" / name)
        with tempfile.TemporaryDirectory() as tmp:
            src = stage(name, pathlib.Path(tmp))
            convert(script, base, src, MODELS[name], out)
        if name in ADDED_KEYS:
            cfg = json.load(open(ROOT / "tests/models" / name / "config.json"))
            add_keys(out, {k: f(cfg) for k, f in ADDED_KEYS[name].items()})
        print(f"{out}: {out.stat().st_size} bytes")
    if a.llama_quantize:
        name, src, pre = EMBEDDED
        with tempfile.TemporaryDirectory() as tmp:
            f32 = pathlib.Path(tmp) / f"{name}.f32.gguf"
            convert(script, base, src, pre, f32, "--no-mtp")  # it has no MTP block
            out = a.out / f"{name}.q4_k_m.gguf"
            if subprocess.run([str(a.llama_quantize), str(f32), str(out), "Q4_K_M"],
                              stdout=subprocess.DEVNULL).returncode != 0:
                sys.exit(f"llama-quantize failed on {f32}")
        print(f"{out}: {out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
