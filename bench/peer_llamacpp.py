#!/usr/bin/env python3
"""hypic against llama.cpp on the same weights, side by side, interleaved.

    .venv/bin/python bench/peer_llamacpp.py --model DIR [--types bf16,int8,q4] [--pairs 3]
        [--pp 512,2048] [--tg 64] [--isa native|avx2] [--ik IK_LLAMA_CPP_SOURCE_DIR]

DIR is a checkpoint in Hugging Face format (config.json + safetensors; e.g. models/hypic-tiny,
`hypic bench make-model --shape qwen3.5-h1024 | qwen3.5-35b-a3b | kimi-linear-48b-a3b`). The
script

  1. fetches llama.cpp as vendored by the llama-cpp-python source package on PyPI
     (`pip download llama-cpp-python==0.3.36 --no-binary :all:`) into --cache and builds
     llama-bench and llama-quantize there (cmake, native CPU flags; on a CPU with AMX the
     native flags minus AMX, because 0.3.36's AMX buffer type crashes in
     ggml_backend_amx_mul_mat on qwen35moe Q4_0 / Q8_0 prefill, and `--repack 0`, which
     avoids it, would also switch off the repacked AVX-512 kernels llama.cpp runs at its best);
     a clear message and exit status 2 when pip or the build fails;
  2. writes the checkpoint as GGUF itself (numpy + the `gguf` package, no torch): llama.cpp's
     qwen35 / qwen35moe tensor names and hyper-parameters (experts stacked [E, out, in], the
     router and the shared expert's gate in F32), norms stored as 1 + w (llama.cpp multiplies by
     the stored weight, Qwen3.5 by 1 + w), ssm_a = −exp(A_log), V heads reordered from grouped
     to tiled when there are more value than key heads, matrices in BF16; Q8_0 and Q4_0 files
     by llama.cpp's own llama-quantize from it. The vocabulary is a placeholder of the right
     size (llama-bench feeds random token ids; no text is compared here). Other families
     (Kimi-Linear, MiniMax, Ling-3.0; only the gguf-TYPE types below) are converted by llama.cpp's
     own convert_hf_to_gguf.py, which needs torch: tools/convert_test_models_gguf.py
     --checkpoint, run by --converter-python (default /opt/hypic-dev/bin/python, the developer
     venv), BF16;
  3. measures matched precisions (hypic bf16 / int8 / q4 against llama.cpp BF16 / Q8_0 /
     Q4_0), 2 threads, prefill of --pp tokens and decode of --tg tokens, alternating the two
     engines --pairs times: llama-bench -p PP -n TG -r 1, and hypic's
     `hypic bench prefill --tokens PP` and `hypic bench decode --batch 1 --steps TG --prompt 1`
     (from an almost empty context, as llama-bench's tg);
  4. where the model ships tokenizer.json (hypic-tiny): greedy text of both engines on one
     prompt, bf16 — a check that both run the same model.

Types `gguf-TYPE` (gguf-q4_k_m, gguf-q5_k_m, gguf-q6_k, gguf-q8_0, gguf-q4_0, gguf-bf16) run
both engines on the same file: llama-quantize writes it from the BF16 file and hypic serves it
as it is (`--model FILE.gguf`, its blocks kept, kernels/gemv_ggml.h); with a vocabulary the
greedy texts of both on that file are compared too.

--isa avx2 runs every engine as on an AVX2-only CPU: llama.cpp (and ik_llama.cpp) built with
GGML_NATIVE=OFF and AVX2 + FMA + F16C only (no AVX-512, no AVX-VNNI), hypic under
HYPIC_MAX_ISA=avx2. --ik adds ik_llama.cpp (a checkout, e.g. made from `fetch
github:ikawrakow/ikawrakow/ik_llama.cpp`; its llama-bench is built in DIR/build-<isa> with the
same flags) as a third engine on the same GGUF files; its commit is recorded.

Prints one JSON document: per type and prompt length, min / median / max of each engine's
tokens/s and of the ratios hypic / peer over the pairs, the CPU flags, hypic's system_info (ISA
tier, kernels) and the peers' builds. HYPIC_BIN names the hypic binary (default build/hypic).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile

import numpy as np

try:
    import gguf
except ImportError:
    sys.exit("peer_llamacpp: the `gguf` package is missing: pip install gguf")

LLAMA_CPP_PYTHON = "0.3.36"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(f"[peer_llamacpp] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------
# llama.cpp from the llama-cpp-python source package

def cpu_has_amx():
    return "amx_int8" in open("/proc/cpuinfo").read().split("flags")[1].split("\n")[0].split()


# An AVX2-only build (as for AMD Zen 2/3): the x86-64-v3 features and nothing above them. ik_llama.cpp
# names AVX-VNNI GGML_AVXVNNI, llama.cpp GGML_AVX_VNNI; each ignores the other's name.
AVX2_FLAGS = ["-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON",
              "-DGGML_BMI2=ON", "-DGGML_AVX512=OFF", "-DGGML_AVX512_VBMI=OFF", "-DGGML_AVX512_VNNI=OFF",
              "-DGGML_AVX512_BF16=OFF", "-DGGML_AVX_VNNI=OFF", "-DGGML_AVXVNNI=OFF", "-DGGML_AMX_TILE=OFF",
              "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"]


def llama_source(cache):
    """llama.cpp's source tree in the cache (unpacked by build_llama)."""
    return os.path.join(cache, f"llama_cpp_python-{LLAMA_CPP_PYTHON}", "vendor", "llama.cpp")


def build_llama(cache, isa_cap="native"):
    amx = cpu_has_amx()
    build = os.path.join(cache, "build-avx2" if isa_cap == "avx2" else "build-noamx" if amx else "build")
    # GGML_NATIVE would enable the AMX buffer type (see the docstring): the same ISA by name.
    isa = (AVX2_FLAGS if isa_cap == "avx2" else
           ["-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON",
            "-DGGML_BMI2=ON", "-DGGML_AVX512=ON", "-DGGML_AVX512_VBMI=ON", "-DGGML_AVX512_VNNI=ON",
            "-DGGML_AVX512_BF16=ON", "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"]
           if amx else ["-DGGML_NATIVE=ON"])
    bins = {n: os.path.join(build, "bin", n) for n in ("llama-bench", "llama-quantize", "llama-completion")}
    if all(os.path.exists(b) for b in bins.values()):
        return bins
    os.makedirs(cache, exist_ok=True)
    sdist = os.path.join(cache, f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz")
    if not os.path.exists(sdist):
        log(f"downloading llama-cpp-python {LLAMA_CPP_PYTHON} (source) into {cache}")
        r = subprocess.run([sys.executable, "-m", "pip", "download", f"llama-cpp-python=={LLAMA_CPP_PYTHON}",
                            "--no-deps", "--no-binary", ":all:", "-d", cache],
                           stdout=sys.stderr)  # stdout carries only the JSON result
        if r.returncode != 0 or not os.path.exists(sdist):
            log("pip could not fetch the llama-cpp-python source package; check the network or "
                f"put {os.path.basename(sdist)} in {cache}")
            sys.exit(2)
    src = llama_source(cache)
    if not os.path.isdir(src):
        log("unpacking the source package")
        with tarfile.open(sdist) as t:
            t.extractall(cache, filter="data")
    log("building llama-bench, llama-quantize and llama-completion (several minutes on 2 cores)")
    for cmd in (["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release", *isa,
                 "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
                 "-DLLAMA_BUILD_SERVER=OFF"],
                ["cmake", "--build", build, "-j", str(os.cpu_count() or 2), "--target",
                 "llama-bench", "llama-quantize", "llama-completion"]):
        if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode != 0:
            log(f"building llama.cpp failed: {' '.join(cmd)}")
            sys.exit(2)
    return bins


def build_ik(src, isa_cap):
    """ik_llama.cpp's llama-bench from the checkout `src`, built with the same ISA as llama.cpp
    (its examples hold llama-bench); returns its path and the checkout's commit."""
    build = os.path.join(src, "build-avx2" if isa_cap == "avx2" else "build-native")
    bench = os.path.join(build, "bin", "llama-bench")
    commit = subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    if not os.path.exists(bench):
        log(f"building ik_llama.cpp's llama-bench in {build} (several minutes on 2 cores)")
        isa = AVX2_FLAGS if isa_cap == "avx2" else ["-DGGML_NATIVE=ON"]
        for cmd in (["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release", *isa, "-DGGML_CURL=OFF",
                     "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=ON",
                     "-DLLAMA_BUILD_SERVER=OFF"],
                    ["cmake", "--build", build, "-j", str(os.cpu_count() or 2), "--target", "llama-bench"]):
            if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode != 0:
                log(f"building ik_llama.cpp failed: {' '.join(cmd)}")
                sys.exit(2)
    return bench, commit or "unknown"


# ----------------------------------------------------------------------------------------
# Safetensors without torch

def read_safetensors(d):
    """name -> (dtype, shape, memory-mapped uint8 bytes) for every tensor of the directory."""
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else \
        [f for f in os.listdir(d) if f.endswith(".safetensors")]
    out = {}
    for f in files:
        path = os.path.join(d, f)
        with open(path, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(n))
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
        for name, e in header.items():
            if name == "__metadata__":
                continue
            b, end = e["data_offsets"]
            out[name] = (e["dtype"], e["shape"], data[b:end])
    return out


def as_f32(t):
    dtype, shape, raw = t
    if dtype == "F32":
        return raw.view(np.float32).reshape(shape)
    if dtype == "BF16":
        return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(shape)
    if dtype == "F16":
        return raw.view(np.float16).astype(np.float32).reshape(shape)
    sys.exit(f"peer_llamacpp: tensor dtype {dtype} is not supported here")


def bf16_bits(x):
    """float32 → bf16 bit patterns, round to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(np.uint16)


# ----------------------------------------------------------------------------------------
# GGUF for llama.cpp's qwen35 (dense Qwen3.5)

def tiled_v(a, axis, nk, per_k, hd):
    """V heads grouped by key head [k0v0 k0v1 .. k1v0 ..] → tiled [k0v0 k1v0 .. k0v1 ..]."""
    a = np.moveaxis(a, axis, 0)
    shape = a.shape
    a = a.reshape(nk, per_k, hd, *shape[1:]).swapaxes(0, 1).reshape(shape)
    return np.ascontiguousarray(np.moveaxis(a, 0, axis))


def write_vocab(w, model_dir, V, cfg):
    """The model's byte-level BPE (tokenizer.json, Qwen2 split pattern) when it has one, so that
    both engines can be given the same text; otherwise a placeholder of the right size
    (llama-bench draws random ids)."""
    path = os.path.join(model_dir, "tokenizer.json")
    tok = json.load(open(path)) if os.path.exists(path) else None
    if tok is None or tok["model"]["type"] != "BPE":
        w.add_tokenizer_model("llama")
        w.add_token_list([f"<t{i}>".encode() for i in range(V)])
        w.add_token_scores([0.0] * V)
        w.add_token_types([gguf.TokenType.NORMAL] * V)
        w.add_bos_token_id(0)
        w.add_eos_token_id(1)
        return False
    tokens = [f"<unused{i}>" for i in range(V)]
    types = [gguf.TokenType.UNUSED] * V
    for t, i in tok["model"]["vocab"].items():
        tokens[i], types[i] = t, gguf.TokenType.NORMAL
    for a in tok.get("added_tokens", []):
        tokens[a["id"]] = a["content"]
        types[a["id"]] = gguf.TokenType.CONTROL if a.get("special") else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    t = cfg.get("text_config", cfg)
    w.add_eos_token_id(t.get("eos_token_id", cfg.get("eos_token_id", 0)))
    w.add_add_bos_token(False)
    return True


def is_qwen35(model_dir):
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    return "qwen3_5" in cfg.get("text_config", cfg).get("model_type", cfg.get("model_type", ""))


def write_gguf(model_dir, out):
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    t = cfg.get("text_config", cfg)
    E = t.get("num_experts") or 0
    ts = read_safetensors(model_dir)
    emb = next(n for n in ts if n.endswith("embed_tokens.weight"))
    P = emb[: -len("embed_tokens.weight")]
    H, L = t["hidden_size"], t["num_hidden_layers"]
    nk, nv = t["linear_num_key_heads"], t["linear_num_value_heads"]
    dk, dv = t["linear_key_head_dim"], t["linear_value_head_dim"]
    per_k = nv // nk
    rope = t.get("rope_parameters") or {}
    prf = rope.get("partial_rotary_factor", t.get("partial_rotary_factor", 0.25))
    sections = list(rope.get("mrope_section", [11, 11, 10]))
    sections += [0] * (4 - len(sections))
    V = ts[emb][1][0]
    layer_types = t.get("layer_types") or [
        "full_attention" if (i + 1) % t.get("full_attention_interval", 4) == 0 else "linear_attention"
        for i in range(L)]

    w = gguf.GGUFWriter(out, "qwen35moe" if E else "qwen35")
    w.add_context_length(t.get("max_position_embeddings", 262144))
    w.add_embedding_length(H)
    w.add_block_count(L)
    if E:
        w.add_expert_count(E)
        w.add_expert_used_count(t["num_experts_per_tok"])
        w.add_expert_feed_forward_length(t["moe_intermediate_size"])
        w.add_expert_shared_feed_forward_length(t["shared_expert_intermediate_size"])
    else:
        w.add_feed_forward_length(t["intermediate_size"])
    w.add_head_count(t["num_attention_heads"])
    w.add_head_count_kv(t["num_key_value_heads"])
    w.add_key_length(t["head_dim"])
    w.add_value_length(t["head_dim"])
    w.add_layer_norm_rms_eps(t.get("rms_norm_eps", 1e-6))
    w.add_rope_freq_base(rope.get("rope_theta", t.get("rope_theta", 1e7)))
    w.add_rope_dimension_count(int(t["head_dim"] * prf))
    w.add_rope_dimension_sections(sections)
    w.add_ssm_conv_kernel(t["linear_conv_kernel_dim"])
    w.add_ssm_state_size(dk)
    w.add_ssm_group_count(nk)
    w.add_ssm_time_step_rank(nv)
    w.add_ssm_inner_size(dv * nv)
    w.add_full_attention_interval(t.get("full_attention_interval", 4))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    write_vocab(w, model_dir, V, cfg)

    def name(kind, bid=None, suffix=".weight"):
        n = gguf.TENSOR_NAMES[kind]
        return (n.format(bid=bid) if bid is not None else n) + suffix

    def mat(n, a):  # matrices in bf16 (raw bits), vectors and small tensors in f32
        w.add_tensor(n, bf16_bits(a), raw_shape=a.shape, raw_dtype=gguf.GGMLQuantizationType.BF16)

    def vec(n, a):
        w.add_tensor(n, np.ascontiguousarray(a, dtype=np.float32))

    T = gguf.MODEL_TENSOR
    mat(name(T.TOKEN_EMBD), as_f32(ts[emb]))
    vec(name(T.OUTPUT_NORM), as_f32(ts[P + "norm.weight"]) + 1.0)
    if "lm_head.weight" in ts and not cfg.get("tie_word_embeddings", t.get("tie_word_embeddings")):
        mat(name(T.OUTPUT), as_f32(ts["lm_head.weight"]))
    for i in range(L):
        p = f"{P}layers.{i}."
        g = lambda k: as_f32(ts[p + k])
        vec(name(T.ATTN_NORM, i), g("input_layernorm.weight") + 1.0)
        vec(name(T.ATTN_POST_NORM, i), g("post_attention_layernorm.weight") + 1.0)
        if layer_types[i] == "linear_attention":
            a = "linear_attn."
            qkv = g(a + "in_proj_qkv.weight").copy()
            z, b, al = g(a + "in_proj_z.weight"), g(a + "in_proj_b.weight"), g(a + "in_proj_a.weight")
            conv = g(a + "conv1d.weight").reshape(-1, t["linear_conv_kernel_dim"]).copy()
            alog, dt, out_w = g(a + "A_log"), g(a + "dt_bias"), g(a + "out_proj.weight")
            if per_k > 1:
                qk = 2 * nk * dk
                qkv[qk:] = tiled_v(qkv[qk:], 0, nk, per_k, dv)
                conv[qk:] = tiled_v(conv[qk:], 0, nk, per_k, dv)
                z = tiled_v(z, 0, nk, per_k, dv)
                b, al = tiled_v(b, 0, nk, per_k, 1), tiled_v(al, 0, nk, per_k, 1)
                alog, dt = tiled_v(alog, 0, nk, per_k, 1), tiled_v(dt, 0, nk, per_k, 1)
                out_w = tiled_v(out_w, 1, nk, per_k, dv)
            mat(name(T.ATTN_QKV, i), qkv)
            mat(name(T.ATTN_GATE, i), z)
            vec(name(T.SSM_CONV1D, i), conv)
            vec(name(T.SSM_DT, i, ".bias"), dt)
            vec(name(T.SSM_A, i, ""), -np.exp(alog))
            mat(name(T.SSM_BETA, i), b)
            mat(name(T.SSM_ALPHA, i), al)
            vec(name(T.SSM_NORM, i), g(a + "norm.weight"))
            mat(name(T.SSM_OUT, i), out_w)
        else:
            a = "self_attn."
            mat(name(T.ATTN_Q, i), g(a + "q_proj.weight"))
            mat(name(T.ATTN_K, i), g(a + "k_proj.weight"))
            mat(name(T.ATTN_V, i), g(a + "v_proj.weight"))
            mat(name(T.ATTN_OUT, i), g(a + "o_proj.weight"))
            vec(name(T.ATTN_Q_NORM, i), g(a + "q_norm.weight") + 1.0)
            vec(name(T.ATTN_K_NORM, i), g(a + "k_norm.weight") + 1.0)
        if not E:
            mat(name(T.FFN_GATE, i), g("mlp.gate_proj.weight"))
            mat(name(T.FFN_UP, i), g("mlp.up_proj.weight"))
            mat(name(T.FFN_DOWN, i), g("mlp.down_proj.weight"))
            continue
        # MoE: the router and the shared expert's gate in f32, experts stacked [E, out, in].
        vec(name(T.FFN_GATE_INP, i), g("mlp.gate.weight"))
        vec(name(T.FFN_GATE_INP_SHEXP, i), g("mlp.shared_expert_gate.weight").reshape(-1))
        for kind, hf in ((T.FFN_GATE_SHEXP, "gate_proj"), (T.FFN_UP_SHEXP, "up_proj"),
                         (T.FFN_DOWN_SHEXP, "down_proj")):
            mat(name(kind, i), g(f"mlp.shared_expert.{hf}.weight"))
        packed = p + "mlp.experts.gate_up_proj"
        for kind, hf in ((T.FFN_GATE_EXP, "gate_proj"), (T.FFN_UP_EXP, "up_proj"),
                         (T.FFN_DOWN_EXP, "down_proj")):
            if packed in ts:  # transformers' packed layout: gate_up [E, 2I, H], down [E, H, I]
                I = t["moe_intermediate_size"]
                a3 = as_f32(ts[p + "mlp.experts.down_proj"]) if hf == "down_proj" else \
                    as_f32(ts[packed])[:, :I] if hf == "gate_proj" else as_f32(ts[packed])[:, I:]
            else:
                a3 = np.stack([g(f"mlp.experts.{e}.{hf}.weight") for e in range(E)])
            mat(name(kind, i), a3)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()


# ----------------------------------------------------------------------------------------
# Measurements

def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"peer_llamacpp: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return r.stdout


# Each engine runs with its own OpenMP wait policy: llama.cpp with the runtime's default (its
# threads spin between the graph's nodes; passive waiting cost it 18× on hypic-tiny's decode
# when a caller's OMP_WAIT_POLICY=passive leaked into it), hypic with the one its CLI sets for
# itself (src/cli/main.cpp: spin ~150 µs, then sleep) — so neither gets the caller's.
OMP_KEYS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "HYPIC_MAX_ISA")
LLAMA_ENV = {k: v for k, v in os.environ.items() if k not in OMP_KEYS}
HYPIC_ENV = dict(LLAMA_ENV)


def llama_tps(bench, gguf_path, pps, tg):
    """{pp: prefill tokens/s}, decode tokens/s of one llama-bench run (llama.cpp or ik_llama.cpp)."""
    out = json.loads(run([bench, "-m", gguf_path, "-p", ",".join(map(str, pps)), "-n", str(tg), "-t", "2",
                          "-r", "1", "-o", "json"], env=LLAMA_ENV))
    pre = {pp: next(r["avg_ts"] for r in out if r["n_prompt"] == pp and r["n_gen"] == 0) for pp in pps}
    dec = next(r["avg_ts"] for r in out if r["n_gen"] == tg and r["n_prompt"] == 0)
    return pre, dec


def hypic_tps(model, dtype, pps, tg):
    """{pp: prefill tokens/s}, decode tokens/s, the decode kernel and hypic's system_info."""
    hypic = HYPIC_BIN
    pre = {}
    for pp in pps:
        j = json.loads(run([hypic, "bench", "prefill", "--model", model, "--tokens", str(pp),
                            "--dtype", dtype], env=HYPIC_ENV))
        pre[pp] = j["tokens_per_s"]
    dec = json.loads(run([hypic, "bench", "decode", "--model", model, "--dtype", dtype,
                          "--batch", "1", "--steps", str(tg), "--prompt", "1"], env=HYPIC_ENV))
    return pre, dec["rows"][0]["batched_tps"], dec["rows"][0]["gemv_kernel"], dec.get("system")


HYPIC_BIN = os.environ.get("HYPIC_BIN", os.path.join(REPO, "build", "hypic"))
GREEDY_PROMPT = "The mayor of Brennwick is Tova Lindqvar. The mayor of Brennwick is"


def greedy_texts(bins, gguf_path, model, n=24):
    """The same prompt through both engines, greedy, n tokens (bf16 weights)."""
    llama = run([bins["llama-completion"], "-m", gguf_path, "-p", GREEDY_PROMPT, "-n", str(n),
                 "--temp", "0", "-t", "2", "--no-display-prompt", "-no-cnv"])
    hypic = run([HYPIC_BIN, "run", "--model", model, "--prompt",
                 GREEDY_PROMPT, "--max-tokens", str(n), "--json"], env=HYPIC_ENV)
    return llama.strip(), json.loads(hypic)["text"].strip()


def stats(xs):
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}


def ratios(h, peer):
    return stats([x / y for x, y in zip(h, peer)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="Qwen3.5 checkpoint directory (HF format, dense or MoE)")
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/hypic/llamacpp"),
                    help="where llama.cpp's source, build and the GGUF files go")
    ap.add_argument("--types", default="bf16,int8,q4", help="hypic types to compare")
    ap.add_argument("--pairs", type=int, default=3, help="alternating measurements per type")
    ap.add_argument("--pp", default="512", help="prefill tokens (a comma-separated list)")
    ap.add_argument("--tg", type=int, default=128, help="decode tokens")
    ap.add_argument("--isa", choices=("native", "avx2"), default="native",
                    help="avx2: every engine as on an AVX2-only CPU (peers built so, hypic capped)")
    ap.add_argument("--ik", help="an ik_llama.cpp checkout: measure it too (same GGUF files, same ISA)")
    ap.add_argument("--converter-python", default="/opt/hypic-dev/bin/python",
                    help="a Python with torch and transformers, for llama.cpp's converter (non-Qwen3.5 models)")
    a = ap.parse_args()
    pps = [int(p) for p in a.pp.split(",")]
    if a.isa == "avx2":
        HYPIC_ENV["HYPIC_MAX_ISA"] = "avx2"
    bins = build_llama(a.cache, a.isa)
    ik_bench, ik_commit = build_ik(a.ik, a.isa) if a.ik else (None, None)
    tag = os.path.basename(os.path.normpath(a.model))
    files = {"bf16": os.path.join(a.cache, f"{tag}-bf16.gguf")}
    if not os.path.exists(files["bf16"]):
        log(f"writing {files['bf16']}")
        if is_qwen35(a.model):
            write_gguf(a.model, files["bf16"] + ".partial")
        else:
            run([a.converter_python, os.path.join(REPO, "tools", "convert_test_models_gguf.py"), "--llama-cpp",
                 llama_source(a.cache), "--checkpoint", a.model, "--outfile", files["bf16"] + ".partial"])
        os.replace(files["bf16"] + ".partial", files["bf16"])
    if not is_qwen35(a.model) and any(not ty.startswith("gguf-") for ty in a.types.split(",")):
        sys.exit("peer_llamacpp: only gguf-TYPE types are measured on a model that is not Qwen3.5")
    peer = {"bf16": "BF16", "int8": "Q8_0", "q4": "Q4_0"}
    for ty in a.types.split(","):
        if ty.startswith("gguf-"):
            peer[ty] = ty[5:].upper()
    for ty in a.types.split(","):
        if ty == "gguf-bf16":
            files[ty] = files["bf16"]
        elif ty != "bf16":
            files[ty] = os.path.join(a.cache, f"{tag}-{peer[ty]}.gguf")
            if not os.path.exists(files[ty]):
                log(f"llama-quantize → {peer[ty]}")
                run([bins["llama-quantize"], files["bf16"], files[ty], peer[ty]])
    has_vocab = os.path.exists(os.path.join(a.model, "tokenizer.json"))
    flags = sorted(f for f in open("/proc/cpuinfo").read().split("flags")[1].split("\n")[0].split()
                   if f.startswith(("avx512", "amx", "avx_vnni")))
    build = ("AVX2 + FMA + F16C only (GGML_NATIVE=OFF)" if a.isa == "avx2" else
             "native ISA minus AMX" if cpu_has_amx() else "native")
    result = {"model": a.model, "pp": pps, "tg": a.tg, "threads": 2, "pairs": a.pairs, "isa": a.isa,
              "llama_cpp_python": LLAMA_CPP_PYTHON, "cpu_flags": flags, "llama_cpp_build": build, "types": {}}
    if ik_bench:
        result["ik_llama_cpp"] = {"commit": ik_commit, "build": build}
    if has_vocab:
        lt, ht = greedy_texts(bins, files["bf16"], a.model)
        result["greedy_bf16"] = {"prompt": GREEDY_PROMPT, "llama_cpp": lt, "hypic": ht, "equal": lt == ht}
    engines = ["hypic", "llama_cpp"] + (["ik_llama_cpp"] if ik_bench else [])
    for ty in a.types.split(","):
        pre = {e: {pp: [] for pp in pps} for e in engines}
        dec = {e: [] for e in engines}
        kernel = None
        for k in range(a.pairs):
            log(f"{ty}: round {k + 1}/{a.pairs}")
            same_file = ty.startswith("gguf-")
            p, d, kernel, system = hypic_tps(files[ty] if same_file else a.model,
                                             "bf16" if same_file else ty, pps, a.tg)
            result.setdefault("hypic_system", system)
            runs = [("hypic", p, d), ("llama_cpp", *llama_tps(bins["llama-bench"], files[ty], pps, a.tg))]
            if ik_bench:
                runs.append(("ik_llama_cpp", *llama_tps(ik_bench, files[ty], pps, a.tg)))
            for e, p, d in runs:
                for pp in pps:
                    pre[e][pp].append(p[pp])
                dec[e].append(d)
        out = {"peer_type": peer[ty], "hypic_decode_kernel": kernel, "prefill_tps": {}, "decode_tps": {},
               "same_file": ty.startswith("gguf-")}
        if ty.startswith("gguf-") and has_vocab:
            lt, ht = greedy_texts(bins, files[ty], files[ty])
            out["greedy"] = {"llama_cpp": lt, "hypic": ht, "equal": lt == ht}
        for pp in pps:
            row = {e: stats(pre[e][pp]) for e in engines}
            for e in engines[1:]:
                row["ratio_" + e] = ratios(pre["hypic"][pp], pre[e][pp])
            out["prefill_tps"][str(pp)] = row
        out["decode_tps"] = {e: stats(dec[e]) for e in engines}
        for e in engines[1:]:
            out["decode_tps"]["ratio_" + e] = ratios(dec["hypic"], dec[e])
        result["types"][ty] = out
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
