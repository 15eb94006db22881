#!/usr/bin/env python3
"""Tiny test checkpoints + golden logits for the KDA (Kimi Delta Attention) + MLA hybrids: Kimi-Linear and Ling-3.0.

Dev-only, like tools/make_golden.py (whose helpers it imports: tokenizers, prompt, seed search, margins,
bf16 checks, tensor layout). CI never runs it; what it writes is committed.

    /opt/hypic-dev/bin/python tools/make_golden_kda.py            # writes tests/models/{kimi_linear_*,ling3_*}
    /opt/hypic-dev/bin/python tools/make_golden_kda.py --out DIR  # somewhere else
    /opt/hypic-dev/bin/python tools/make_golden_kda.py --only ling3_hybrid_unsafe
    /opt/hypic-dev/bin/python tools/make_golden_kda.py --check    # re-verify the committed files only

Directories (transformers 5.23.0 classes, fp32, CPU, one thread, eager attention, eager experts, the torch
fallbacks chunk_kimi_delta_attention (chunk 64) / recurrent_kimi_delta_attention / torch causal conv1d):
  kimi_linear_moe/      KimiLinearForCausalLM (model_type kimi_linear), shaped like Kimi-Linear-48B-A3B:
                        linear_attn_config with 1-indexed kda_layers / full_attn_layers, MLA without RoPE and
                        without q LoRA, DeepSeek-V3 router (sigmoid, e_score_correction_bias, 4 groups keep 2),
                        1 shared expert, first layer dense. Written in the HUB layout (see MODELS).
  kimi_linear_odd/      the same class with odd shapes: q_lora_rank (q_a_proj / q_a_layernorm / q_b_proj),
                        5 KDA heads, 3 MLA heads, kv_lora_rank 24, qk_rope 4, v_head_dim 12 != qk_nope 16,
                        full attention at 1-indexed layers 2 and 5, 6 experts top-3 in one group, no
                        renormalisation, no shared expert, two dense layers. save_pretrained's default output.
  ling3_hybrid/         BailingHybridForCausalLM (model_type bailing_hybrid, Ling-3.0): layer_group_size 3,
                        safe KDA gate (lower bound -5), MLA with interleaved RoPE on the rope dims and a
                        head-wise sigmoid output gate, two dense layers, 8 experts top-2 (4 groups keep 2),
                        1 shared expert, sharded. save_pretrained's default output (= the hub layout).
  ling3_hybrid_unsafe/  the same class with the softplus KDA gate (kda_safe_gate false), 5 heads, 5 layers in
                        groups of 2 (transformers: full attention at 1 and 3 only; the trailing layer 4 is KDA),
                        rope_theta 1e4, 6 experts top-3 in 3 groups keep 2, no renormalisation, 2 shared experts.

Neither class ties embeddings (both set `_tied_weights_keys = {}`: tie_word_embeddings=true leaves lm_head
separate), so every directory is untied. Procedure per directory (make_golden's): seed search (16 greedy steps
with margin >= 0.05, >= 10 distinct ids, no special token, greedy unchanged by bf16 - model cast to bf16 and
weights rounded to bf16 - and the largest min margin / bf16 deviation), save, reload (must reproduce the built
model's logits bit for bit), goldens from the reloaded model, decode (cached) vs one prefill, the independent
reference below, and ablations (each part zeroed or neutralised: how far the prompt logits move).

=====================================================================================================
Semantics (transformers 5.23.0; `reference_logits` below is their executable form, reading only the files)
=====================================================================================================
Notation: x [T, H] hidden states, rows are tokens; W·x means x @ W.T for a checkpoint matrix W [out, in];
all fp32 (transformers casts to fp32 where noted, which matters only for bf16 runs).

Decoder (both): x0 = embed[ids]; per layer  x += mixer(rms(x, input_layernorm));
x += mlp(rms(x, post_attention_layernorm));  logits = lm_head · rms(x, model.norm). No embedding scaling,
untied lm_head.
  rms(x, w, eps) = w * x / sqrt(mean(x^2) + eps): the weight is used AS IS (not 1 + w), fp32. eps:
  rms_norm_eps for input/post-attention/final norms and the KDA o_norm; a FIXED 1e-6 for the MLA
  kv_a_layernorm and q_a_layernorm (constructed without eps; Kimi's rms_norm_eps is 1e-5).

Layer types.
  Kimi: linear_attn_config.full_attn_layers / kda_layers are 1-INDEXED (layer i is MLA iff i+1 is listed
  in full_attn_layers); transformers also writes the 0-indexed list `layer_types` ("linear_attention" |
  "full_attention"). Layers i < first_k_dense_replace have a dense SwiGLU MLP of intermediate_size, the
  others MoE (transformers writes `mlp_layer_types` "dense" | "sparse").
  Ling: layer i is MLA iff (i + 1) % layer_group_size == 0, else KDA - so a trailing partial group is all
  KDA in transformers (ling3_hybrid_unsafe: 5 layers, groups of 2 -> MLA at 1, 3; layer 4 is KDA; a
  third-party port (mlx-swift-lm's BailingMoeV3) states the original remote code makes the trailing layers
  full attention instead - not verifiable here, the files carry an explicit `layer_types`, use it).
  Dense iff i < first_k_dense_replace (also in `mlp_layer_types`).

KDA layer (both families; H heads, head dim d = K = V; Kimi: linear_attn_config.num_heads / head_dim /
short_conv_kernel_size; Ling: num_attention_heads / head_dim (the hub meaning) / short_conv_kernel_size -
BUT the config.json transformers writes has head_dim = qk_rope_head_dim and the KDA head dim in
`linear_head_dim` (also `linear_num_heads`, `linear_conv_kernel_dim`); prefer those keys when present):
  q, k, v = Wq·x, Wk·x, Wv·x                        each [T, H*d], channel c = head c // d
  q, k, v = silu(causal depthwise conv of each channel over time, kernel Kc, no bias):
            y[t, c] = sum_{j=0}^{Kc-1} w[c, j] * u[t - Kc + 1 + j, c]   (u[<0] = 0; w = conv weight [C, 1, Kc])
            (hub / default save: q_conv1d, k_conv1d, v_conv1d [H*d, 1, Kc] each; transformers' internal
            conv1d.weight [3*H*d, 1, Kc] is their concatenation in the order q, k, v)
  per head: q = q / sqrt(sum(q^2) + 1e-6) * d^-1/2,   k = k / sqrt(sum(k^2) + 1e-6)   (L2 norm, eps INSIDE
            the sqrt on the sum - not F.normalize's max(norm, eps); fp32; the scale after the norm)
  beta[t, h] = sigmoid(Wb·x)                            b_proj [H, hidden]
  forget gate g[t, h, i] (log-decay per head AND key channel i, fp32):
    Kimi:        f = Wfb·(Wfa·x) + dt_bias   (f_a_proj [d, hidden], f_b_proj [H*d, d], dt_bias [H*d])
                 g = -exp(A_log[h]) * softplus(f)   (A_log stored [1, 1, H, 1]; softplus(f) = f for f > 20,
                 else log(1 + exp(f)))
    Ling safe:   f = Wf·x + dt_bias               (f_proj [H*d, hidden], dt_bias [H*d], A_log [H])
                 g = kda_lower_bound * sigmoid(exp(A_log[h]) * f)        in (lower_bound, 0)
    Ling unsafe: g = -exp(A_log[h]) * softplus(f)  (F.softplus, threshold 20)
  recurrence per head, state S in R^{d_k x d_v} (rows = key channels), S_0 = 0, fp32:
    S' = Diag(exp(g_t)) S              (row i scaled by exp(g[t, h, i]): decay per KEY channel)
    S_t = S' + beta_t k_t (v_t - S'^T k_t)^T
    o_t = S_t^T q_t                    (the output reads the state AFTER this token's update)
  This is transformers' recurrent_kimi_delta_attention line for line (state * g_i.exp(); kv_mem =
  sum_k S*k = S'^T k; delta = (v - kv_mem) * beta; S += k delta^T; o = sum_k S*q); prefill runs
  chunk_kimi_delta_attention (chunk 64, the WY / UT-transform form of the same recurrence) - the
  decode-vs-prefill figures are the two agreeing.
  output gate z [T, H, d]: Kimi z = Wgb·(Wga·x) (g_a_proj [d, hidden], g_b_proj [H*d, d]); Ling z = Wg·x
  (g_proj [H*d, hidden]). o = rms(o_head, o_norm.weight [d], rms_norm_eps) * sigmoid(z) per head
  (fp32: weight used as is), then o_proj (hub Ling: attention.dense) [hidden, H*d].

MLA layer (nh = num_attention_heads, dn = qk_nope_head_dim, dr = qk_rope_head_dim, dv = v_head_dim,
r = kv_lora_rank; num_key_value_heads must equal nh):
  q = Wq·x, or with q_lora_rank: q = Wqb·rms(Wqa·x, q_a_layernorm, 1e-6)     [T, nh, dn + dr]
  [c | k_rot] = Wkva·x                     kv_a_proj_with_mqa [r + dr, hidden]
  c = rms(c, kv_a_layernorm, 1e-6);  [k_nope | v] = (Wkvb·c) viewed [T, nh, dn + dv]   kv_b_proj [nh*(dn+dv), r]
  Kimi: NO rotary embedding anywhere (KimiLinearModel has no rotary_emb; the hub config's mla_use_nope).
  Ling: q_rot = q[..., dn:] and the shared k_rot [T, dr] rotated with INTERLEAVED pairs: for pair
        i < dr/2, (a, b) = (x[2i], x[2i+1]), angle = pos * theta^(-2i/dr) (inv_freq computed in fp32,
        theta = rope_parameters.rope_theta, pos = absolute index from 0):
            a' = a cos - b sin,  b' = b cos + a sin.
        transformers writes the result DE-interleaved, [a'_0 .. a'_{dr/2-1}, b'_0 .. b'_{dr/2-1}], for
        both q and k; the layout of the rope part is irrelevant to q.k as long as q and k agree (the
        reference keeps the pairs in place). No YaRN here (rope_type default: no mscale).
  key = [k_nope | k_rot broadcast to all heads], query = [q_nope | q_rot]; causal softmax attention with
  scale (dn + dr)^-1/2 (fp32 softmax); o [T, nh, dv].
  Ling: o *= sigmoid(Wg·x)[..., None]   (head-wise gate g_proj [nh, hidden], sigmoid in fp32).
  out = Wo·o.reshape(T, nh*dv)             (Kimi o_proj; hub Ling attention.dense).

MLP / MoE (DeepSeek-V3 router, both families; E experts, top-k, n_group groups of E/n_group, topk_group):
  dense / shared / expert: down(silu(gate·x) * up·x); shared width = moe_intermediate_size *
  n_shared_experts (the hub Ling key moe_shared_expert_intermediate_size is not read by transformers).
  logits = Wr·x in fp32 (gate.weight [E, hidden]); s = sigmoid(logits)   (always sigmoid: neither class
  has another score function); choice = s + bias (e_score_correction_bias; hub Ling: gate.expert_bias)
  group score = sum of the 2 largest choices in the group; keep the topk_group best groups, choices of
  experts in the others := -inf; top-k experts by choice; w = s at those experts (UNBIASED scores);
  if norm_topk_prob (Kimi config key moe_renormalize): w /= (sum w + 1e-20); w *= routed_scaling_factor;
  out = sum_j w_j expert_j(x) + shared_experts(x) (no shared-expert gate).
  The original Kimi remote code masks dropped groups with 0.0 instead of -inf (differs only when a kept
  choice is negative); `reference_logits` counts such decisions (0 in all four directories).

Where transformers casts: the router (fp32 logits/scores), the KDA recurrence / chunk kernel (q, k, v, g,
beta to fp32; state fp32), the gated RMSNorm (fp32 incl. its weight and the sigmoid of the gate), MLA
softmax (fp32), Ling's MLA head gate (sigmoid in fp32, cast back), Ling's forget gate (fp32, cast back to
the activation dtype: in bf16 the log-decay itself is rounded to bf16), Kimi's forget gate (fp32, kept).
=====================================================================================================
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import re
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import make_golden as mg  # noqa: E402  (one thread, deterministic algorithms, offline; asserts versions)

import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import (  # noqa: E402
    BailingHybridConfig,
    BailingHybridForCausalLM,
    KimiLinearConfig,
    KimiLinearForCausalLM,
)

F = torch.nn.functional
REPO = mg.REPO


# ----------------------------------------------------------------------------------------------
# Tokenizers: THE one place that picks them - each family's own test BPE from tools/family_tokenizers.py.
# Kimi: a tiktoken rank file (tiktoken.model, no tokenizer.json) whose vocab_size counts the ranks and Kimi's
# 258 special ids after them: 768 = 510 ranks (256 bytes + 254 merges, about the 509 learned tokens of the
# 512-id tokenizer.json families) + 258. The config.json eos is <|im_end|> (n + 2) and pad [PAD] (n + 255),
# as Kimi-Linear's released config.json (163586 / 163839; the tokenizer's own eos_token is [EOS], n + 1).
# Ling-3.0: tokenizer.json, vocab 512 (eos <|role_end|>, pad <|endoftext|>: tokenizer_config's, as the hub).
# ----------------------------------------------------------------------------------------------
def tokenizer_family(model_type: str) -> str:
    return {"kimi_linear": "kimi", "bailing_hybrid": "ling3"}[model_type]


TOKENIZER_VOCAB = {"kimi": 768}                          # build()'s vocab_size; others mg.VOCAB_SIZE (512)
MODEL_EOS_PAD = {"kimi": ("<|im_end|>", "[PAD]")}        # config.json's eos / pad tokens where they differ


def tokenizer(model_type: str) -> mg.TokInfo:
    fam = tokenizer_family(model_type)
    return mg.tokenizer_for(fam, TOKENIZER_VOCAB.get(fam, mg.VOCAB_SIZE), *MODEL_EOS_PAD.get(fam, (None, None)))


# ----------------------------------------------------------------------------------------------
# Configs
# ----------------------------------------------------------------------------------------------
def kimi_moe_config(t: mg.TokInfo) -> KimiLinearConfig:
    return KimiLinearConfig(
        vocab_size=t.vocab,
        hidden_size=64,
        num_hidden_layers=6,
        linear_attn_config={"full_attn_layers": [3, 6], "kda_layers": [1, 2, 4, 5],  # 1-indexed, as the hub
                            "num_heads": 4, "head_dim": 16, "short_conv_kernel_size": 4},
        num_attention_heads=4,
        num_key_value_heads=4,            # MLA: must equal the heads (the default 32 would break repeat_kv)
        q_lora_rank=None,                 # as Kimi-Linear-48B: q_proj
        kv_lora_rank=32,
        qk_nope_head_dim=16,
        qk_rope_head_dim=8,               # NoPE: the "rope" part is never rotated in Kimi
        v_head_dim=16,
        intermediate_size=96,
        moe_intermediate_size=16,
        num_local_experts=8,
        num_experts_per_tok=2,
        n_group=4,
        topk_group=2,
        norm_topk_prob=True,
        routed_scaling_factor=2.446,
        n_shared_experts=1,
        first_k_dense_replace=1,
        rms_norm_eps=1e-5,
        hidden_act="silu",
        tie_word_embeddings=False,
        bos_token_id=None, eos_token_id=t.eos, pad_token_id=t.pad,
        dtype="float32",
    )


def kimi_odd_config(t: mg.TokInfo) -> KimiLinearConfig:
    return KimiLinearConfig(
        vocab_size=t.vocab,
        hidden_size=64,
        num_hidden_layers=5,
        linear_attn_config={"full_attn_layers": [2, 5], "kda_layers": [1, 3, 4],
                            "num_heads": 5, "head_dim": 16, "short_conv_kernel_size": 4},
        num_attention_heads=3,            # MLA heads != KDA heads
        num_key_value_heads=3,
        q_lora_rank=24,                   # q_a_proj -> q_a_layernorm -> q_b_proj
        kv_lora_rank=24,
        qk_nope_head_dim=16,
        qk_rope_head_dim=4,
        v_head_dim=12,                    # != qk_nope_head_dim
        intermediate_size=80,
        moe_intermediate_size=24,
        num_local_experts=6,
        num_experts_per_tok=3,
        n_group=1,
        topk_group=1,
        norm_topk_prob=False,
        routed_scaling_factor=1.5,
        n_shared_experts=0,               # transformers still builds a zero-width shared MLP (see README)
        first_k_dense_replace=2,
        rms_norm_eps=1e-6,
        hidden_act="silu",
        tie_word_embeddings=False,        # not supported by KimiLinearForCausalLM (_tied_weights_keys = {})
        bos_token_id=None, eos_token_id=t.eos, pad_token_id=t.pad,
        dtype="float32",
    )


def ling3_config(t: mg.TokInfo) -> BailingHybridConfig:
    return BailingHybridConfig(
        vocab_size=t.vocab,
        hidden_size=64,
        num_hidden_layers=6,
        layer_group_size=3,               # MLA at 2 and 5
        num_attention_heads=4,            # KDA and MLA heads
        num_key_value_heads=4,
        head_dim=16,                      # the KDA head dim (config.json will say linear_head_dim 16, head_dim 8)
        short_conv_kernel_size=4,
        kda_safe_gate=True,
        kda_lower_bound=-5.0,
        kv_lora_rank=32,
        qk_nope_head_dim=16,
        qk_rope_head_dim=8,
        v_head_dim=16,
        rope_theta=6e6,
        intermediate_size=96,
        moe_intermediate_size=16,
        num_local_experts=8,
        num_experts_per_tok=2,
        n_group=4,
        topk_group=2,
        norm_topk_prob=True,
        routed_scaling_factor=2.5,
        n_shared_experts=1,
        first_k_dense_replace=2,
        num_mtp_layers=0,
        rms_norm_eps=1e-6,
        hidden_act="silu",
        tie_word_embeddings=False,
        bos_token_id=None, eos_token_id=t.eos, pad_token_id=t.pad,
        dtype="float32",
    )


def ling3_unsafe_config(t: mg.TokInfo) -> BailingHybridConfig:
    return BailingHybridConfig(
        vocab_size=t.vocab,
        hidden_size=64,
        num_hidden_layers=5,
        layer_group_size=2,               # transformers: MLA at 1, 3; trailing layer 4 is KDA
        num_attention_heads=5,
        num_key_value_heads=5,
        head_dim=16,
        short_conv_kernel_size=4,
        kda_safe_gate=False,              # g = -exp(A_log) * softplus(f_proj x + dt_bias)
        kda_lower_bound=-5.0,             # unused
        kv_lora_rank=24,
        qk_nope_head_dim=12,
        qk_rope_head_dim=4,
        v_head_dim=20,
        rope_theta=10000.0,
        intermediate_size=80,
        moe_intermediate_size=16,
        num_local_experts=6,
        num_experts_per_tok=3,
        n_group=3,
        topk_group=2,
        norm_topk_prob=False,
        routed_scaling_factor=1.5,
        n_shared_experts=2,               # shared width 2 * 16
        first_k_dense_replace=1,
        num_mtp_layers=0,
        rms_norm_eps=1e-5,
        hidden_act="silu",
        tie_word_embeddings=False,        # not supported by BailingHybridForCausalLM
        bos_token_id=None, eos_token_id=t.eos, pad_token_id=t.pad,
        dtype="float32",
    )


def ling3_lora_limits_config(t: mg.TokInfo) -> BailingHybridConfig:
    """ling3_hybrid with q through q_a_proj / q_a_layernorm / q_b_proj and non-zero SwiGLU limits on some
    MoE layers (routed and shared; layers 0-1 are dense, which transformers never clamps): transformers
    >= 5.25 reads both."""
    cfg = ling3_config(t)
    cfg.q_lora_rank = 24
    cfg.expert_swiglu_limit_list = [0, 0, 0.15, 0, 0.1, 0.12]
    cfg.share_expert_swiglu_limit_list = [0, 0, 0.1, 0.12, 0, 0.08]
    # BailingHybridConfig.__post_init__ filled these from the (then absent) lists
    cfg.swiglu_limits, cfg.swiglu_limits_shared = cfg.expert_swiglu_limit_list, cfg.share_expert_swiglu_limit_list
    return cfg


# ----------------------------------------------------------------------------------------------
# Randomisation: every parameter and the correction-bias buffer get a random value in a realistic range
# ----------------------------------------------------------------------------------------------
GAINS = dict(
    embed=0.5, lm_head=0.5,
    lm_head_special=0.1,      # lm_head rows of the tokenizer's special ids (Kimi: 253 of 768, 248 of them reserved,
                              # never trained in the real model): at full gain a random lm_head would pick one
                              # within 16 greedy steps for almost every seed (a third of the vocabulary)
    norm=0.2,                 # every RMSNorm weight (used as is) ~ N(1, 0.2^2)
    final_norm_mean=1.0,      # mean of model.norm's weight
    read=0.6,                 # projections reading the residual stream / a bottleneck: N(0, read^2 / fan_in)
    write=0.3,                # o_proj, dense / shared down_proj
    expert_write=0.1,         # routed experts' down projections
    first_layer_write=None,   # write gain of layer 0 (None: as write)
    gate=1.5,                 # b_proj (beta), KDA output gate (g_proj, g_b_proj), MLA head gate (Ling g_proj)
    conv=0.5,                 # short-conv taps ~ N(0, conv^2)
    router=1.0,               # router [E, H] ~ N(0, (router / sqrt(H))^2): sigmoid scores in their linear range
    bias=0.1,                 # e_score_correction_bias ~ N(0, bias^2)
    a_log=(-1.0, 1.5),        # A_log ~ U: A = exp(A_log) in [0.37, 4.5]
    dt_bias=(-6.0, -1.0),     # dt_bias ~ U (softplus gates: per-channel decays from ~0.25 to ~0.999)
)
GATE_SUFFIXES = ("b_proj.weight", "g_proj.weight", "g_b_proj.weight")
WRITE_SUFFIXES = ("o_proj.weight", "down_proj.weight")


@torch.no_grad()
def randomise(model: torch.nn.Module, seed: int, gains: dict | None = None, special_ids=()) -> None:
    G = dict(GAINS, **(gains or {}))
    special_ids = torch.tensor(sorted(special_ids), dtype=torch.long)
    g = torch.Generator().manual_seed(seed)

    def normal(shape, std, mean=0.0):
        return torch.randn(shape, generator=g, dtype=torch.float32) * std + mean

    def uniform(shape, lo, hi):
        return torch.rand(shape, generator=g, dtype=torch.float32) * (hi - lo) + lo

    tensors = list(model.named_parameters()) + [(n, b) for n, b in model.named_buffers()
                                                if n.endswith("e_score_correction_bias")]
    for name, p in tensors:
        shape, leaf = p.shape, name.split(".")[-1]
        if name.endswith("embed_tokens.weight"):
            v = normal(shape, G["embed"])
        elif name == "lm_head.weight":
            v = normal(shape, G["lm_head"])
            v[special_ids] *= G["lm_head_special"] / G["lm_head"]   # the same draws, those rows scaled
        elif name == "model.norm.weight":
            v = normal(shape, G["norm"], mean=G["final_norm_mean"])
        elif name.endswith("norm.weight"):   # input/post-attention, o_norm, kv_a_layernorm, q_a_layernorm
            v = normal(shape, G["norm"], mean=1.0)
        elif leaf == "A_log":
            v = uniform(shape, *G["a_log"])
        elif leaf == "dt_bias":
            v = uniform(shape, *G["dt_bias"])
        elif name.endswith("conv1d.weight"):
            v = normal(shape, G["conv"])
        elif leaf == "e_score_correction_bias":
            v = normal(shape, G["bias"])
        elif name.endswith("mlp.gate.weight"):
            v = normal(shape, G["router"] / shape[-1] ** 0.5)
        elif name.endswith("experts.gate_up_proj"):   # [E, 2I, H]
            v = normal(shape, G["read"] / shape[-1] ** 0.5)
        elif name.endswith("experts.down_proj"):      # [E, H, I]
            v = normal(shape, G["expert_write"] / shape[-1] ** 0.5)
        elif leaf == "weight" and p.dim() == 2:
            if p.numel() == 0:
                continue                                 # n_shared_experts 0: zero-width shared MLP
            if name.endswith(GATE_SUFFIXES):
                gain = G["gate"]
            elif name.endswith(WRITE_SUFFIXES):
                gain = G["write"]
                if ".layers.0." in name and G["first_layer_write"] is not None:
                    gain = G["first_layer_write"]
            else:
                gain = G["read"]
            v = normal(shape, gain / shape[-1] ** 0.5)
        else:
            raise RuntimeError(f"randomise: no rule for {name} {tuple(shape)}")
        p.copy_(v)


# ----------------------------------------------------------------------------------------------
# Building, saving, reloading
# ----------------------------------------------------------------------------------------------
def eager(cfg):
    cfg._attn_implementation = "eager"
    cfg._experts_implementation = "eager"   # the plain per-expert loop (HF's default grouped_mm rounds differently)
    return cfg


def build(cls, cfg_fn, t, seed: int, gains: dict):
    torch.manual_seed(seed)
    with warnings.catch_warnings():   # n_shared_experts 0: "Initializing zero-element tensors is a no-op"
        warnings.simplefilter("ignore", UserWarning)
        model = cls(eager(cfg_fn(t)))
    randomise(model, seed, gains, special_ids=t.specials)
    return model.eval()


def load_hf(cls, model_dir: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = cls.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager",
                                    experts_implementation="eager", use_kernels=False)  # 5.25: hub kernels by default
    model.eval()
    with torch.no_grad():  # mmap'd safetensors are not 64-byte aligned; BLAS rounding depends on alignment
        for p in model.parameters():
            p.data = p.data.clone()
        for b in model.buffers():
            b.data = b.data.clone()
    assert model.config._attn_implementation == "eager", model.config._attn_implementation
    for n, p in model.named_parameters():
        assert p.dtype == torch.float32, n
    return model


KIMI_DENSE_MLP = re.compile(r"^(model\.layers\.\d+)\.block_sparse_moe\.((?:gate|up|down)_proj\.weight)$")


def to_kimi_hub_layout(out_dir: str) -> list[str]:
    """save_pretrained's kimi_linear output -> the hub layout. transformers reverses its load-time rename
    `.block_sparse_moe.` -> `.mlp.` on every `.mlp.`, so the dense layers come out as
    `block_sparse_moe.{gate,up,down}_proj`; Kimi-Linear's hub files (remote code: KimiDecoderLayer.mlp =
    KimiMLP) have `mlp.{gate,up,down}_proj` there. Everything else save_pretrained writes is already the hub
    layout. Returns the renamed keys."""
    files = sorted(fn for fn in os.listdir(out_dir) if fn.startswith("model") and fn.endswith(".safetensors"))
    assert files == ["model.safetensors"], files
    path = os.path.join(out_dir, "model.safetensors")
    with safe_open(path, framework="pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    renamed, out = [], {}
    for k, v in tensors.items():
        m = KIMI_DENSE_MLP.match(k)
        if m:
            renamed.append(k)
            k = f"{m.group(1)}.mlp.{m.group(2)}"
        out[k] = v
    save_file(out, path, metadata=meta)
    return renamed


from kda_reference import reference_logits  # noqa: E402  (the independent reference)


def independent_check(model_dir: str, prompt, greedy_ids, prompt_logits, decode_logits) -> dict:
    stats: dict = {}
    seq, T = prompt + greedy_ids[:-1], len(prompt)
    full = reference_logits(model_dir, seq, stats)
    full64 = reference_logits(model_dir, seq, {}, dtype=torch.float64)
    res = {"greedy_same": full[T - 1:].argmax(-1).tolist() == greedy_ids,
           "fp64_vs_golden": float(torch.cat([(full64[:T] - prompt_logits.double()).abs().flatten(),
                                              (full64[T - 1:] - decode_logits.double()).abs().flatten()]).max()),
           "fp64_vs_fp32_reference": float((full64 - full.double()).abs().max()),
           "prompt": float((full[:T] - prompt_logits).abs().max()),
           "decode": float((full[T - 1:] - decode_logits).abs().max()),
           "zero_mask_routing_differs": stats["zero_mask_routing_differs"],
           "routed_token_layers": stats["routed_tokens"]}
    if not res["greedy_same"]:
        res["prompt"] = res["decode"] = float("inf")
    print(f"  {os.path.basename(model_dir)}: independent reference vs golden max|diff| prompt {res['prompt']:.3e}, "
          f"decode {res['decode']:.3e}; fp64 reference vs golden {res['fp64_vs_golden']:.3e} (vs the fp32 reference "
          f"{res['fp64_vs_fp32_reference']:.3e}); routing decisions that the remote code's 0.0 group mask would change: "
          f"{res['zero_mask_routing_differs']} of {res['routed_token_layers']}", flush=True)
    return res


# ----------------------------------------------------------------------------------------------
# Ablations: how far the prompt logits move when a part is zeroed / neutralised
# ----------------------------------------------------------------------------------------------
@torch.no_grad()
def ablations(model, prompt: list[int]) -> dict[str, float]:
    """mean |logit_ablated - logit| / std(logit) over the prompt, per part."""
    base = mg.prefill_logits(model, prompt)
    std = float(base.std())
    cfg = model.config
    out: dict[str, float] = {}

    def run(label, edit):
        m = copy.deepcopy(model)
        handles = edit(m) or []
        out[label] = round(float((mg.prefill_logits(m, prompt) - base).abs().mean()) / std, 4)
        for hd in handles:
            hd.remove()

    def zero(*names):
        def edit(m):
            sd = dict(m.named_parameters())
            sd.update(dict(m.named_buffers()))
            for n in names:
                sd[n].zero_()
        return edit

    params = dict(model.named_parameters())
    kda_layers = [i for i, t in enumerate(cfg.layer_types) if t == "linear_attention"]
    for i, t in enumerate(cfg.layer_types):
        kind = "KDA" if t == "linear_attention" else "MLA"
        run(f"layer {i} {kind} (o_proj = 0)", zero(f"model.layers.{i}.self_attn.o_proj.weight"))
    for i, t in enumerate(cfg.mlp_layer_types):
        if t == "dense":
            run(f"layer {i} dense MLP (down_proj = 0)", zero(f"model.layers.{i}.mlp.down_proj.weight"))
    sparse = [i for i, t in enumerate(cfg.mlp_layer_types) if t == "sparse"]
    run("routed experts, all layers (experts.down_proj = 0)", zero(*[f"model.layers.{i}.mlp.experts.down_proj"
                                                                      for i in sparse]))
    shared = [f"model.layers.{i}.mlp.shared_experts.down_proj.weight" for i in sparse]
    if params[shared[0]].numel():
        run("shared experts, all layers (down_proj = 0)", zero(*shared))
    run("e_score_correction_bias = 0 (routing choice)", zero(*[f"model.layers.{i}.mlp.gate.e_score_correction_bias"
                                                                for i in sparse]))

    def conv_identity(m):
        for i in kda_layers:
            w = m.model.layers[i].self_attn.conv1d.weight
            w.zero_()
            w[..., -1] = 1.0
    run("KDA short convs -> identity (then SiLU)", conv_identity)

    def per_head_decay(m):
        def hook(mod, inp, outp):
            return outp.mean(-1, keepdim=True).expand_as(outp).contiguous()
        return [m.model.layers[i].self_attn.forget_gate.register_forward_hook(hook) for i in kda_layers]
    run("KDA decay averaged over key channels (GDN-like per-head decay)", per_head_decay)
    f_in = "f_b_proj" if isinstance(model, KimiLinearForCausalLM) else "f_proj"
    run(f"KDA forget gate input ({f_in} = 0: decay from dt_bias / A_log only)",
        zero(*[f"model.layers.{i}.self_attn.forget_gate.{f_in}.weight" for i in kda_layers]))
    run("KDA beta (b_proj = 0: beta = 0.5)", zero(*[f"model.layers.{i}.self_attn.b_proj.weight" for i in kda_layers]))
    g_out = "g_b_proj" if isinstance(model, KimiLinearForCausalLM) else "g_proj"
    run(f"KDA output gate ({g_out} = 0: sigmoid = 0.5)",
        zero(*[f"model.layers.{i}.self_attn.{g_out}.weight" for i in kda_layers]))
    mla_layers = [i for i, t in enumerate(cfg.layer_types) if t == "full_attention"]
    if isinstance(model, BailingHybridForCausalLM):
        run("MLA head gate (g_proj = 0: sigmoid = 0.5)",
            zero(*[f"model.layers.{i}.self_attn.g_proj.weight" for i in mla_layers]))
        run("MLA RoPE off (inv_freq = 0)", zero("model.rotary_emb.inv_freq"))

        def flip_gate(m):
            for i in kda_layers:
                fgm = m.model.layers[i].self_attn.forget_gate
                fgm.safe_gate = not fgm.safe_gate
        run("KDA forget-gate formula flipped (kda_safe_gate read the other way)", flip_gate)
    return out


# ----------------------------------------------------------------------------------------------
# One directory
# ----------------------------------------------------------------------------------------------
# Gains per model (on top of GAINS). The Ling safe gate reads A*(x + dt_bias) through a sigmoid: dt_bias in
# [-4, 0] gives per-channel decays from ~0.08 to ~1.
LING_SAFE_GAINS = {"dt_bias": (-4.0, 0.0)}

MODELS = {
    # name: (class, config fn, base seed, gains, save)
    # save: "hub"     - save_pretrained, then the dense layers' block_sparse_moe.* renamed to mlp.* (Kimi's hub layout)
    #       "default" - save_pretrained as is (its default save_original_format=True); for bailing_hybrid that is
    #                   the hub layout, for kimi_linear the hub layout except the dense-layer names
    "kimi_linear_moe": (KimiLinearForCausalLM, kimi_moe_config, 8000, {}, {"layout": "hub"}),
    "kimi_linear_odd": (KimiLinearForCausalLM, kimi_odd_config, 9000, {}, {"layout": "default"}),
    "ling3_hybrid": (BailingHybridForCausalLM, ling3_config, 10000, LING_SAFE_GAINS,
                     {"layout": "default", "max_shard_size": "1MB"}),
    "ling3_hybrid_unsafe": (BailingHybridForCausalLM, ling3_unsafe_config, 11000, {}, {"layout": "default"}),
    "ling3_lora_limits": (BailingHybridForCausalLM, ling3_lora_limits_config, 12000, LING_SAFE_GAINS,
                          {"layout": "default", "transformers": "5.25.0"}),
}


def make_model(name: str, out_root: str, n_seeds: int) -> dict:
    cls, cfg_fn, base_seed, gains, save = MODELS[name]
    need = save.get("transformers", mg.REQUIRED_TRANSFORMERS)
    assert transformers.__version__ == need, f"{name} is made with transformers=={need}"
    model_type = cls.config_class.model_type
    t = tokenizer(model_type)
    prompt_text, prompt = mg.prompt_ids_from_text(t)
    assert t.decode(prompt) == prompt_text

    # 1. seed search (make_golden's criteria)
    seed = mg.pick_seed(name, range(base_seed, base_seed + n_seeds), lambda s: build(cls, cfg_fn, t, s, gains),
                        lambda m: mg.evaluate(m, prompt, t.specials))

    # 2. build, save, reload
    out_dir = os.path.join(out_root, name)
    mg.clear_dir(out_dir)
    model = build(cls, cfg_fn, t, seed, gains)
    ref_prefill = mg.prefill_logits(model, prompt)
    kw = {"max_shard_size": save["max_shard_size"]} if "max_shard_size" in save else {}
    model.save_pretrained(out_dir, **kw)
    renamed = to_kimi_hub_layout(out_dir) if save["layout"] == "hub" else []
    mg.write_tokenizer(t, out_dir)
    del model
    model = load_hf(cls, out_dir)

    # 3. golden data from the reloaded model
    prompt_logits = mg.prefill_logits(model, prompt)
    reload_diff = float((prompt_logits - ref_prefill).abs().max())
    assert reload_diff == 0.0, f"{name}: reloaded model differs from the built one ({reload_diff})"
    r = mg.evaluate(model, prompt, t.specials)
    assert r["ok"], name
    greedy_ids, decode_logits = r["greedy"], r["decode_logits"]
    m = mg.margins(decode_logits)

    # 4. decode path (KV + conv + recurrent cache) vs one prefill forward; independent reference; ablations
    full = mg.prefill_logits(model, prompt + greedy_ids[:-1])
    T = len(prompt)
    dec_vs_prefill = float((full[T - 1:] - decode_logits).abs().max())
    print(f"  [{name}] seed {seed}: min margin {float(m.min()):.4f}; decode vs prefill max|diff| {dec_vs_prefill:.3e}",
          flush=True)
    save_file({"prompt_logits": prompt_logits.contiguous(), "decode_logits": decode_logits.contiguous()},
              os.path.join(out_dir, "golden_logits.safetensors"), metadata={"format": "pt"})
    abl = ablations(model, prompt)
    for k, v in abl.items():
        print(f"    ablation {k}: {v:.4f}")
    layer_types = list(model.config.layer_types)
    del model
    ref = independent_check(out_dir, prompt, greedy_ids, prompt_logits, decode_logits)
    assert max(ref["prompt"], ref["decode"]) < 1e-3, (name, ref)
    xc = layout_crosscheck(cls, out_dir, prompt[:80])
    assert max(xc.values()) == 0.0, (name, xc)

    producer = f"transformers {transformers.__version__} {cls.__name__}"
    layout = ("hub layout: save_pretrained's output with the dense layers' block_sparse_moe.{gate,up,down}_proj "
              "renamed to mlp.* (" + ", ".join(renamed) + ")") if renamed else \
        "save_pretrained's default output (save_original_format=True)"
    desc = (f"{producer}, fp32 on CPU, eval, no grad, attn_implementation=eager, experts_implementation=eager, "
            "torch fallbacks: chunk_kimi_delta_attention (chunk 64) for prefill, recurrent_kimi_delta_attention and "
            "causal_conv1d_update for cached decode. prompt_logits: one prefill forward over prompt_ids, logits at "
            "every position [T, V]. decode_logits: generate(do_sample=False, output_logits=True) - row i produced "
            "greedy_ids[i] (row 0 from the prefill, rows 1.. from the cached decode path). bf16: the same HF model "
            "cast to bf16 (and, separately, this fp32 model with weights rounded to bf16) reproduces the 16 greedy "
            "ids; *_max_abs_logit_dev[i] = max_v |logit_bf16 - logit_fp32| at greedy step i, teacher-forced on "
            f"prompt_ids + greedy_ids. Tensors: {layout}. layer_types {layer_types}. ablation: mean |delta logit| / "
            "std(logits) over the prompt when the part is zeroed or neutralised. "
            "Generated by tools/make_golden_kda.py; do not edit.")
    golden = {
        "prompt_ids": prompt,
        "greedy_ids": greedy_ids,
        "reference": producer,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "tokenizer": t.source,
        "seed": seed,
        "min_margin": round(float(m.min()), 6),
        "margins": [round(float(x), 6) for x in m],
        "decode_vs_prefill_max_abs_diff": dec_vs_prefill,
        "independent_reference_max_abs_diff": {"prompt_logits": ref["prompt"], "decode_logits": ref["decode"]},
        "bf16": {
            "hf_bf16_greedy_matches": r["bf16_match"],
            "bf16_rounded_weights_greedy_matches": r["wround_match"],
            "hf_bf16_max_abs_logit_dev": [round(float(x), 4) for x in r["dev_bf16"]],
            "bf16_rounded_weights_max_abs_logit_dev": [round(float(x), 4) for x in r["dev_wround"]],
            "min_margin_over_hf_bf16_dev": round(r["robustness"], 4),
        },
        "ablation_mean_abs_dlogit_over_std": abl,
        "init_gains": dict(GAINS, **gains),
        "prompt_text": prompt_text,
        "greedy_text": t.decode(greedy_ids),
        "notes": desc,
    }
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)
        f.write("\n")
    for fn in os.listdir(out_dir):
        os.chmod(os.path.join(out_dir, fn), 0o644)
    mg.check_dir_tokenizer(t, out_dir, prompt_text, prompt)   # the files as written, read back
    size = sum(os.path.getsize(os.path.join(out_dir, fn)) for fn in os.listdir(out_dir))
    return {"name": name, "seed": seed, "min_margin": float(m.min()), "dec_vs_prefill": dec_vs_prefill,
            "size": size, "layout": mg.tensor_layout(out_dir), "T": T, "ref": ref, "ablation": abl,
            "dev_bf16": (float(r["dev_bf16"].min()), float(r["dev_bf16"].max())),
            "dev_wround": (float(r["dev_wround"].min()), float(r["dev_wround"].max())),
            "robustness": r["robustness"], "tokenizer": t.source}


HF_ONLY_CONFIG_KEYS = ("layer_types", "mlp_layer_types", "linear_head_dim", "linear_num_heads",
                       "linear_conv_kernel_dim", "rope_parameters", "qk_head_dim")


@torch.no_grad()
def layout_crosscheck(cls, model_dir: str, ids: list[int]) -> dict:
    """The reference on the same weights in transformers' internal layout (save_original_format=False: packed
    experts, fused conv1d, forget_gate.*, self_attn.*, e_score_correction_bias) and on a hub-style config.json
    (no layer_types / mlp_layer_types / linear_* / rope_parameters keys; Ling's head_dim = the KDA head dim)
    must give the same logits as on the committed files."""
    import tempfile
    base = reference_logits(model_dir, ids)
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        internal = os.path.join(tmp, "internal")
        load_hf(cls, model_dir).save_pretrained(internal, save_original_format=False)
        res["internal_layout"] = float((reference_logits(internal, ids) - base).abs().max())
        hub = os.path.join(tmp, "hub_config")
        os.makedirs(hub)
        for fn in os.listdir(model_dir):
            if fn.endswith(".safetensors") or fn == "model.safetensors.index.json":
                os.symlink(os.path.join(os.path.abspath(model_dir), fn), os.path.join(hub, fn))
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        if cfg["model_type"] == "bailing_hybrid":
            cfg["head_dim"] = cfg["linear_head_dim"]
        for k in HF_ONLY_CONFIG_KEYS:
            cfg.pop(k, None)
        with open(os.path.join(hub, "config.json"), "w") as f:
            json.dump(cfg, f)
        res["hub_config"] = float((reference_logits(hub, ids) - base).abs().max())
    print(f"  {os.path.basename(model_dir)}: reference on the internal layout / a hub-style config.json vs the "
          f"committed files: {res['internal_layout']:.3e} / {res['hub_config']:.3e}", flush=True)
    return res


def check_dir(model_dir: str) -> dict:
    with open(os.path.join(model_dir, "golden.json")) as f:
        g = json.load(f)
    with safe_open(os.path.join(model_dir, "golden_logits.safetensors"), framework="pt") as f:
        pl, dl = f.get_tensor("prompt_logits"), f.get_tensor("decode_logits")
    return independent_check(model_dir, g["prompt_ids"], g["greedy_ids"], pl, dl)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "models"))
    ap.add_argument("--only", default=None, help="comma-separated directory names")
    ap.add_argument("--seeds", type=int, default=mg.SEED_CANDIDATES)
    ap.add_argument("--check", action="store_true",
                    help="only compare the committed files against the independent plain-torch reference")
    args = ap.parse_args()
    names = [n for n in MODELS if not args.only or n in args.only.split(",")]

    if args.check:
        worst = 0.0
        for name in names:
            res = check_dir(os.path.join(args.out, name))
            worst = max(worst, res["prompt"], res["decode"])
        print(f"worst max|diff| {worst:.3e}")
        return 0 if worst < 1e-3 else 1

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, threads {torch.get_num_threads()}")
    results = [make_model(n, args.out, args.seeds) for n in names]
    mg.print_report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
