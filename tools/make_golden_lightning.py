#!/usr/bin/env python3
"""Tiny test checkpoints + golden logits for the Lightning-attention hybrids: Ring-linear-2.0 and MiniMax.

Dev-only, like tools/make_golden.py (whose helpers it imports: tokenizer, prompt, seed search,
margins, bf16 checks). CI never runs it; what it writes is committed.

    /opt/hypic-dev/bin/python tools/make_golden_lightning.py            # writes tests/models/{ring_*,minimax_*}
    /opt/hypic-dev/bin/python tools/make_golden_lightning.py --out DIR  # somewhere else
    /opt/hypic-dev/bin/python tools/make_golden_lightning.py --only ring_linear_odd
    /opt/hypic-dev/bin/python tools/make_golden_lightning.py --check    # re-verify the committed files only

Directories (all fp32, CPU, one thread, deterministic):
  ring_linear_moe/  BailingMoeLinearV2ForCausalLM (Ring-linear-2.0). transformers has no class for it:
                    the checkpoint is tools/ring_reference.py's state_dict and the goldens are that
                    reference's logits (token-by-token Lightning recurrence, plain softmax attention).
  ring_linear_odd/  the same architecture with odd shapes (6 heads, GQA 3, tail attention layer,
                    explicit rotary_dim, linear_silu, softmax router, tied embeddings).
  minimax_moe/      transformers' MiniMaxForCausalLM (model_type "minimax"), save_pretrained format.
  minimax_rotary/   the original MiniMax-M1 format (model_type "minimax_m1", attn_type_list,
                    layernorm_*_alpha/beta, rotary_dim); goldens from transformers' MiniMax classes
                    patched to the original semantics (partial NeoX RoPE on rotary_dim dims; the
                    original ALiBi slope rule and layer factor, see patch_minimax_original).

For each: seed search as make_golden (16 greedy steps with margin >= 0.05, >= 10 distinct ids,
no special token, greedy unchanged by bf16 — model cast to bf16 and weights rounded to bf16 — and
the largest min margin / bf16 deviation), save, reload from the files (must reproduce the built
model's logits bit for bit), goldens from the reloaded model, decode (cached state) vs one prefill,
and an independent plain-torch re-implementation reading only the files (Ring: the parallel
decay-masked form of Lightning attention; MiniMax: a token-by-token recurrence, no HF code).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import make_golden as mg  # noqa: E402  (sets one thread, deterministic algorithms, offline; asserts versions)
import ring_reference as ring  # noqa: E402

import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import MiniMaxConfig, MiniMaxForCausalLM  # noqa: E402
from transformers.models.minimax import modeling_minimax  # noqa: E402

F = torch.nn.functional
REPO = mg.REPO



# The test tokenizers and directory helpers are make_golden's (shared with tools/make_golden_kda.py).
TokInfo, tokenizer_for, clear_dir, write_tokenizer = mg.TokInfo, mg.tokenizer_for, mg.clear_dir, mg.write_tokenizer


# ----------------------------------------------------------------------------------------------
# Configs
# ----------------------------------------------------------------------------------------------
def ring_moe_config(t: TokInfo) -> dict:
    return {
        "architectures": ["BailingMoeLinearV2ForCausalLM"],
        "model_type": "bailing_moe_linear",
        "vocab_size": t.vocab,
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 6,
        "layer_group_size": 3,            # attention at layers 2 and 5
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "partial_rotary_factor": 0.5,     # 8 rotary dims
        "rope_theta": 1000000.0,
        "rope_scaling": None,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "group_norm_size": 2,
        "linear_silu": False,
        "use_qk_norm": True,
        "use_qkv_bias": False,
        "use_bias": False,
        "first_k_dense_replace": 1,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "num_shared_experts": 1,
        "moe_intermediate_size": 16,
        "moe_shared_expert_intermediate_size": 16,
        "moe_router_enable_expert_bias": True,
        "n_group": 4,
        "topk_group": 2,
        "norm_topk_prob": True,
        "routed_scaling_factor": 2.5,
        "score_function": "sigmoid",
        "router_dtype": "fp32",
        "num_nextn_predict_layers": 0,
        "tie_word_embeddings": False,
        "eos_token_id": t.eos,
        "pad_token_id": t.pad,
        "torch_dtype": "float32",
    }


def ring_odd_config(t: TokInfo) -> dict:
    return {
        "architectures": ["BailingMoeLinearV2ForCausalLM"],
        "model_type": "bailing_moe_linear",
        "vocab_size": t.vocab,
        "hidden_size": 64,
        "intermediate_size": 80,
        "num_hidden_layers": 5,
        "layer_group_size": 2,            # attention at 1, 3 and the tail layer 4
        "num_attention_heads": 6,         # not a power of two: ALiBi fallback slopes
        "num_key_value_heads": 2,         # GQA ratio 3
        "head_dim": 16,                   # nh * hd = 96 != hidden 64
        "rotary_dim": 4,                  # explicit; no partial_rotary_factor key (default 1.0 would give 16)
        "rope_theta": 1000000.0,
        "rope_scaling": None,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "group_norm_size": 3,             # 3 groups of 32 channels (2 heads each)
        "linear_silu": True,
        "use_qk_norm": True,
        "use_qkv_bias": False,
        "use_bias": False,
        "first_k_dense_replace": 2,
        "num_experts": 6,
        "num_experts_per_tok": 3,
        "num_shared_experts": 0,
        "moe_intermediate_size": 24,
        "moe_router_enable_expert_bias": False,
        "n_group": 1,
        "topk_group": 1,
        "norm_topk_prob": False,
        "routed_scaling_factor": 1.0,
        "score_function": "softmax",
        "router_dtype": "fp32",
        "num_nextn_predict_layers": 0,
        "tie_word_embeddings": True,
        "eos_token_id": t.eos,
        "pad_token_id": t.pad,
        "torch_dtype": "float32",
    }


MINIMAX_COMMON = dict(
    hidden_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    intermediate_size=32,             # the experts' width
    num_local_experts=8,
    num_experts_per_tok=2,
    rms_norm_eps=1e-5,
    hidden_act="silu",
    block_size=64,                    # the 222-token prompt spans 4 Lightning blocks
    max_position_embeddings=4096,
    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
    tie_word_embeddings=False,
    sliding_window=None,
)


def minimax_moe_config(t: TokInfo) -> MiniMaxConfig:
    return MiniMaxConfig(
        vocab_size=t.vocab, **MINIMAX_COMMON,
        num_hidden_layers=6,
        layer_types=["linear_attention", "linear_attention", "full_attention",
                     "linear_attention", "linear_attention", "full_attention"],
        full_attn_alpha_factor=1.5, full_attn_beta_factor=0.75,
        linear_attn_alpha_factor=1.25, linear_attn_beta_factor=0.9,
        mlp_alpha_factor=1.3, mlp_beta_factor=0.8,
        bos_token_id=None, eos_token_id=t.eos, pad_token_id=t.pad, dtype="float32",
    )


M1_ATTN_TYPES = [0, 1, 0, 0, 1]
M1_ROTARY_DIM = 8
M1_ALPHA, M1_BETA = 2.0, 1.0


def minimax_rotary_hf_config(t: TokInfo) -> MiniMaxConfig:
    """The `minimax` config equivalent to minimax_rotary's M1 config.json (minus rotary_dim, which
    transformers ignores: patch_minimax_original supplies it)."""
    c = dict(MINIMAX_COMMON, num_attention_heads=3, num_key_value_heads=1)
    return MiniMaxConfig(
        vocab_size=t.vocab, **c,
        num_hidden_layers=len(M1_ATTN_TYPES),
        layer_types=["linear_attention" if a == 0 else "full_attention" for a in M1_ATTN_TYPES],
        full_attn_alpha_factor=M1_ALPHA, full_attn_beta_factor=M1_BETA,
        linear_attn_alpha_factor=M1_ALPHA, linear_attn_beta_factor=M1_BETA,
        mlp_alpha_factor=M1_ALPHA, mlp_beta_factor=M1_BETA,
        bos_token_id=None, eos_token_id=t.eos, pad_token_id=t.pad, dtype="float32",
    )


def minimax_m1_config_json(hf: MiniMaxConfig) -> dict:
    """config.json in the original MiniMax-M1 format (keys as MiniMaxAI/MiniMax-M1-*'s config.json;
    its auto_map / transformers_version are left out: no remote code ships with this checkpoint)."""
    return {
        "architectures": ["MiniMaxM1ForCausalLM"],
        "model_type": "minimax_m1",
        "attention_dropout": 0.0,
        "attn_type_list": list(M1_ATTN_TYPES),
        "block_size": hf.block_size,
        "bos_token_id": None,
        "eos_token_id": hf.eos_token_id,
        "pad_token_id": hf.pad_token_id,
        "head_dim": hf.head_dim,
        "hidden_act": "silu",
        "hidden_size": hf.hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": hf.intermediate_size,
        "layernorm_full_attention_alpha": M1_ALPHA,
        "layernorm_full_attention_beta": M1_BETA,
        "layernorm_linear_attention_alpha": M1_ALPHA,
        "layernorm_linear_attention_beta": M1_BETA,
        "layernorm_mlp_alpha": M1_ALPHA,
        "layernorm_mlp_beta": M1_BETA,
        "max_position_embeddings": hf.max_position_embeddings,
        "num_attention_heads": hf.num_attention_heads,
        "num_experts_per_tok": hf.num_experts_per_tok,
        "num_hidden_layers": hf.num_hidden_layers,
        "num_key_value_heads": hf.num_key_value_heads,
        "num_local_experts": hf.num_local_experts,
        "output_router_logits": False,
        "postnorm": True,
        "rms_norm_eps": hf.rms_norm_eps,
        "rope_theta": hf.rope_parameters["rope_theta"],
        "rotary_dim": M1_ROTARY_DIM,
        "router_aux_loss_coef": 0.001,
        "router_jitter_noise": 0.0,
        "shared_intermediate_size": 0,
        "shared_moe_mode": "sigmoid",
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
        "use_cache": True,
        "vocab_size": hf.vocab_size,
    }


# ----------------------------------------------------------------------------------------------
# MiniMax: transformers 5.23 -> the original MiniMax semantics (minimax_rotary only)
# ----------------------------------------------------------------------------------------------
_hf_apply_rotary = modeling_minimax.apply_rotary_pos_emb


def _apply_partial_rotary(q, k, cos, sin, unsqueeze_dim=1):
    """transformers' NeoX rotation on the first cos.shape[-1] dims of each head, the rest passed
    through (the original MiniMax code and vLLM). With cos covering the whole head (every
    unpatched model) this is transformers' own function, unchanged."""
    rot = cos.shape[-1]
    if rot == q.shape[-1]:
        return _hf_apply_rotary(q, k, cos, sin, unsqueeze_dim)
    qr, kr = _hf_apply_rotary(q[..., :rot], k[..., :rot], cos, sin, unsqueeze_dim)
    return torch.cat([qr, q[..., rot:]], -1), torch.cat([kr, k[..., rot:]], -1)


modeling_minimax.apply_rotary_pos_emb = _apply_partial_rotary  # a no-op for full-rotary models


def original_slope_rate(n_heads: int, layer: int, n_layers: int) -> torch.Tensor:
    """MiniMax's original code / vLLM: ALiBi slopes (power-of-two rule with the standard fallback for
    other head counts) * (1 - layer / (L - 1) + 1e-5). transformers 5.23 uses 2^(-8(h+1)/H) for every
    H (different for H not a power of two) and 1 - layer / (L - 1 + 1e-5) + 1e-5."""
    factor = 1 + 1e-5 if n_layers <= 1 else 1 - layer / (n_layers - 1) + 1e-5
    return torch.tensor(ring.alibi_slopes(n_heads), dtype=torch.float32) * factor


def hf_slope_rate(n_heads: int, layer: int, n_layers: int) -> torch.Tensor:
    """transformers 5.23 MiniMaxLightningAttention.get_slope_rate (for the independent reference)."""
    base = 1 / (2 ** (8 / n_heads))
    return base ** (torch.arange(n_heads) + 1) * (1 - layer / (n_layers - 1 + 1e-5) + 1e-5)


@torch.no_grad()
def patch_minimax_original(model: MiniMaxForCausalLM, rotary_dim: int) -> None:
    cfg = model.config
    for i, layer in enumerate(model.model.layers):
        att = layer.self_attn
        if isinstance(att, modeling_minimax.MiniMaxLightningAttention):
            slope = original_slope_rate(cfg.num_attention_heads, i, cfg.num_hidden_layers)[:, None, None]
            q_decay, k_decay, diag_decay = att.decay_factors(slope)
            att.slope_rate, att.query_decay, att.key_decay, att.diagonal_decay = slope, q_decay, k_decay, diag_decay
    theta = cfg.rope_parameters["rope_theta"]
    inv_freq = 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float) / rotary_dim))
    model.model.rotary_emb.inv_freq = inv_freq
    model.model.rotary_emb.original_inv_freq = inv_freq.clone()


LIGHTNING_BUFFERS = ("slope_rate", "query_decay", "key_decay", "diagonal_decay")


# ----------------------------------------------------------------------------------------------
# Randomisation (weights of RMSNorms are used as is in both families: drawn around 1)
# ----------------------------------------------------------------------------------------------
GAINS = dict(
    embed=0.5, lm_head=0.5,
    norm=0.2,          # RMSNorm weights ~ N(1, 0.2^2)
    router=5.0,        # router [E, H] ~ N(0, (router / sqrt(H))^2)
    expert_bias=0.1,   # Ring's expert_bias ~ N(0, 0.1^2)
    read=0.6,          # projections reading the residual stream: N(0, read^2 / fan_in)
    write=0.3,         # projections writing into it (dense, out_proj, o_proj, down_proj, w2)
    expert_write=0.3,  # the routed experts' down projections (packed experts.down_proj, experts.{e}.down_proj / w2)
    first_layer_write=None,  # write gain of layer 0 (None: as write)
    final_norm_mean=1.0,     # mean of the final norm's weight (scales the logits)
)
WRITE_SUFFIXES = ("attention.dense.weight", "out_proj.weight", "o_proj.weight", "down_proj.weight", "w2.weight")


@torch.no_grad()
def randomise(model: torch.nn.Module, seed: int, gains: dict | None = None) -> None:
    G = dict(GAINS, **(gains or {}))
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        shape = p.shape
        if name.endswith(("embed_tokens.weight", "word_embeddings.weight")):
            v = torch.randn(shape, generator=g) * G["embed"]
        elif name == "lm_head.weight":
            v = torch.randn(shape, generator=g) * G["lm_head"]
        elif name == "model.norm.weight":
            v = torch.randn(shape, generator=g) * G["norm"] + G["final_norm_mean"]
        elif name.endswith("norm.weight"):  # input/post-attention, q/k, g_norm, Lightning norm
            v = torch.randn(shape, generator=g) * G["norm"] + 1.0
        elif name.endswith("mlp.gate.weight"):
            v = torch.randn(shape, generator=g) * (G["router"] / shape[-1] ** 0.5)
        elif name.endswith("mlp.gate.expert_bias"):
            v = torch.randn(shape, generator=g) * G["expert_bias"]
        elif name.endswith("experts.gate_up_proj"):  # HF packed [E, 2I, H]
            v = torch.randn(shape, generator=g) * (G["read"] / shape[-1] ** 0.5)
        elif name.endswith("experts.down_proj"):     # HF packed [E, H, I]
            v = torch.randn(shape, generator=g) * (G["expert_write"] / shape[-1] ** 0.5)
        elif name.endswith("weight") and p.dim() == 2:
            gain = G["write"] if name.endswith(WRITE_SUFFIXES) else G["read"]
            if ".experts." in name and name.endswith(("down_proj.weight", "w2.weight")):
                gain = G["expert_write"]
            elif name.endswith(WRITE_SUFFIXES) and ".layers.0." in name and G["first_layer_write"] is not None:
                gain = G["first_layer_write"]
            v = torch.randn(shape, generator=g) * (gain / shape[-1] ** 0.5)
        else:
            raise RuntimeError(f"randomise: no rule for {name} {tuple(shape)}")
        p.copy_(v)


# ----------------------------------------------------------------------------------------------
# Runners for the Ring reference (the HF ones are make_golden.greedy / prefill_logits)
# ----------------------------------------------------------------------------------------------
@torch.no_grad()
def ring_prefill(model, ids: list[int]) -> torch.Tensor:
    return model(ids)


@torch.no_grad()
def ring_greedy(model, ids: list[int]) -> tuple[list[int], torch.Tensor]:
    """As generate(do_sample=False): row 0 from the prefill, rows 1.. from one-token decode steps."""
    st = model.new_state()
    rows = [model(ids, st)[-1]]
    new: list[int] = []
    for i in range(mg.N_GREEDY):
        new.append(int(rows[-1].argmax()))
        if i + 1 < mg.N_GREEDY:
            rows.append(model([new[-1]], st)[0])
    return new, torch.stack(rows).float()


# ----------------------------------------------------------------------------------------------
# Independent checks: plain torch, reading only the files on disk
# ----------------------------------------------------------------------------------------------
def rms(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def neox(x, pos, rot, theta):
    inv = 1.0 / theta ** (torch.arange(0, rot, 2, dtype=torch.float32) / rot)
    ang = pos.float()[:, None] * inv
    cos, sin = torch.cat([ang, ang], -1).cos()[:, None], torch.cat([ang, ang], -1).sin()[:, None]
    xr = x[..., :rot]
    rh = torch.cat([-xr[..., rot // 2:], xr[..., :rot // 2]], -1)
    return torch.cat([xr * cos + rh * sin, x[..., rot:]], -1)


def softmax_attention(q, k, v, scale):
    """causal GQA; q [T, nh, hd], k/v [T, nkv, hd]"""
    T, nh, _ = q.shape
    kv_of = torch.arange(nh) // (nh // k.shape[1])
    s = torch.einsum("thd,shd->hts", q, k[:, kv_of]) * scale
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return torch.einsum("hts,shd->thd", s.softmax(-1), v[:, kv_of]).reshape(T, -1)


def lightning_parallel(q, k, v, slope):
    """o_t = sum_{s<=t} exp(-slope (t - s)) (q_t . k_s) v_s: the parallel (decay-masked) form of
    S_t = lambda S_{t-1} + k_t v_t^T, o_t = S_t^T q_t with lambda = exp(-slope); q/k/v [T, nh, hd]."""
    T = q.shape[0]
    d = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).float()
    decay = torch.where(d >= 0, torch.exp(-slope[:, None, None] * d.clamp(min=0)), torch.zeros(()))
    return torch.einsum("hts,shd->thd", torch.einsum("thd,shd->hts", q, k) * decay, v)


def swiglu(x, wg, wu, wd):
    return (F.silu(x @ wg.T) * (x @ wu.T)) @ wd.T


@torch.no_grad()
def ring_parallel_logits(model_dir: str, ids: list[int]) -> torch.Tensor:
    """Ring-linear-2.0 from the files, Lightning in its parallel form (tools/ring_reference.py runs
    the recurrence), routing written out again; shares only config_from_dict and alibi_slopes."""
    with open(os.path.join(model_dir, "config.json")) as f:
        c = ring.config_from_dict(json.load(f))
    W = ring.load_tensors(model_dir)
    T, eps = len(ids), c.rms_norm_eps
    nh, nkv, hd, H = c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.hidden_size
    pos = torch.arange(T)
    x = W["model.word_embeddings.weight"][torch.tensor(ids)]
    for i in range(c.num_hidden_layers):
        p = f"model.layers.{i}."
        h = rms(x, W[p + "input_layernorm.weight"], eps)
        a = p + "attention."
        qkv = h @ W[a + "query_key_value.weight"].T
        nk = nh if not c.is_attention_layer(i) else nkv
        if not c.is_attention_layer(i) and c.linear_silu:
            qkv = F.silu(qkv)
        q = qkv[:, :nh * hd].view(T, nh, hd)
        k = qkv[:, nh * hd:(nh + nk) * hd].view(T, nk, hd)
        v = qkv[:, (nh + nk) * hd:].view(T, nk, hd)
        if c.use_qk_norm:
            q, k = rms(q, W[a + "query_layernorm.weight"], eps), rms(k, W[a + "key_layernorm.weight"], eps)
        q, k = neox(q, pos, c.rotary_dim, c.rope_theta), neox(k, pos, c.rotary_dim, c.rope_theta)
        if c.is_attention_layer(i):
            o = softmax_attention(q, k, v, hd ** -0.5)
        else:
            L = c.num_hidden_layers
            slope = torch.tensor(ring.alibi_slopes(nh)) * (1 - i / (L - 1) + 1e-5 if L > 1 else 1 + 1e-5)
            o = lightning_parallel(q * hd ** -0.5, k, v, slope).reshape(T, nh * hd)
            G = c.group_norm_size
            og = o.view(T, G, -1)
            o = (og * torch.rsqrt(og.pow(2).mean(-1, keepdim=True) + eps)).reshape(T, -1) * W[a + "g_norm.weight"]
            o = o * torch.sigmoid(h @ W[a + "g_proj.weight"].T)
        x = x + o @ W[a + "dense.weight"].T
        h = rms(x, W[p + "post_attention_layernorm.weight"], eps)
        m = p + "mlp."
        if not c.is_moe_layer(i):
            x = x + swiglu(h, W[m + "gate_proj.weight"], W[m + "up_proj.weight"], W[m + "down_proj.weight"])
            continue
        E, K = c.num_experts, c.num_experts_per_tok
        logits = h @ W[m + "gate.weight"].T
        sc = torch.sigmoid(logits) if c.score_function == "sigmoid" else logits.softmax(-1)
        out = torch.zeros_like(h)
        for t in range(T):
            ch = sc[t] + W[m + "gate.expert_bias"] if c.moe_router_enable_expert_bias else sc[t].clone()
            if c.n_group > 1:
                gs = E // c.n_group
                gsc = [sorted(ch[j * gs:(j + 1) * gs].tolist(), reverse=True)[:2] for j in range(c.n_group)]
                order = sorted(range(c.n_group), key=lambda j: (-sum(gsc[j]), j))[:c.topk_group]
                ch = torch.tensor([ch[e].item() if e // gs in order else float("-inf") for e in range(E)])
            top = sorted(range(E), key=lambda e: (-ch[e].item(), e))[:K]
            w = sc[t, top]
            if c.norm_topk_prob:
                w = w / (w.sum() + 1e-20)
            w = w * c.routed_scaling_factor
            for j, e in enumerate(top):
                ep = f"{m}experts.{e}."
                out[t] += w[j] * swiglu(h[t], W[ep + "gate_proj.weight"], W[ep + "up_proj.weight"],
                                        W[ep + "down_proj.weight"])
        if c.num_shared_experts:
            sp = m + "shared_experts."
            out = out + swiglu(h, W[sp + "gate_proj.weight"], W[sp + "up_proj.weight"], W[sp + "down_proj.weight"])
        x = x + out
    x = rms(x, W["model.norm.weight"], eps)
    return x @ W.get("lm_head.weight", W["model.word_embeddings.weight"]).T


@torch.no_grad()
def minimax_reference_logits(model_dir: str, ids: list[int], slope_rule: str | None = None,
                             full_rotary: bool = False) -> torch.Tensor:
    """MiniMax (HF `minimax` or original `minimax_m1` format) from the files, no transformers code:
    token-by-token Lightning recurrence. slope_rule: "original" (default for minimax_m1) or "hf"
    (default for minimax); full_rotary: ignore rotary_dim (for the record only)."""
    cfg, W = mg.load_checkpoint(model_dir)
    m1 = cfg["model_type"] == "minimax_m1"
    H, L, nh, nkv = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, eps, T = cfg.get("head_dim") or H // nh, cfg["rms_norm_eps"], len(ids)
    if m1:
        assert cfg["postnorm"] and not cfg.get("shared_intermediate_size"), "only postnorm, no shared expert"
        linear = [a == 0 for a in cfg["attn_type_list"]]
        rot, theta = hd if full_rotary else cfg.get("rotary_dim") or hd, cfg["rope_theta"]
        ab = {"linear": (cfg["layernorm_linear_attention_alpha"], cfg["layernorm_linear_attention_beta"]),
              "full": (cfg["layernorm_full_attention_alpha"], cfg["layernorm_full_attention_beta"]),
              "mlp": (cfg["layernorm_mlp_alpha"], cfg["layernorm_mlp_beta"])}
    else:
        linear = [lt == "linear_attention" for lt in cfg["layer_types"]]
        rot, theta = hd, cfg["rope_parameters"]["rope_theta"]
        ab = {"linear": (cfg["linear_attn_alpha_factor"], cfg["linear_attn_beta_factor"]),
              "full": (cfg["full_attn_alpha_factor"], cfg["full_attn_beta_factor"]),
              "mlp": (cfg["mlp_alpha_factor"], cfg["mlp_beta_factor"])}
    slope_fn = original_slope_rate if (slope_rule or ("original" if m1 else "hf")) == "original" else hf_slope_rate
    E, K = cfg["num_local_experts"], cfg["num_experts_per_tok"]
    pos = torch.arange(T)
    x = W["model.embed_tokens.weight"][torch.tensor(ids)]
    for i in range(L):
        p = f"model.layers.{i}."
        h = rms(x, W[p + "input_layernorm.weight"], eps)
        a = p + "self_attn."
        if linear[i]:
            qkv = F.silu(h @ W[a + "qkv_proj.weight"].T).view(T, nh, 3 * hd)   # per head [q | k | v]
            q, k, v = qkv[..., :hd], qkv[..., hd:2 * hd], qkv[..., 2 * hd:]
            lam = torch.exp(-slope_fn(nh, i, L))[:, None, None]
            S = torch.zeros(nh, hd, hd)
            o = torch.empty(T, nh, hd)
            for t in range(T):
                S = lam * S + k[t, :, :, None] * v[t, :, None, :]
                o[t] = torch.einsum("hk,hkv->hv", q[t], S)
            o = rms(o.reshape(T, nh * hd), W[a + "norm.weight"], 1e-6)        # eps 1e-6, not rms_norm_eps
            o = (torch.sigmoid(h @ W[a + "output_gate.weight"].T) * o) @ W[a + "out_proj.weight"].T
            al, be = ab["linear"]
        else:
            q = (h @ W[a + "q_proj.weight"].T).view(T, nh, hd)
            k = (h @ W[a + "k_proj.weight"].T).view(T, nkv, hd)
            v = (h @ W[a + "v_proj.weight"].T).view(T, nkv, hd)
            q, k = neox(q, pos, rot, theta), neox(k, pos, rot, theta)
            o = softmax_attention(q, k, v, hd ** -0.5) @ W[a + "o_proj.weight"].T
            al, be = ab["full"]
        x = al * h + be * o                                   # the residual is the normed input
        h = rms(x, W[p + "post_attention_layernorm.weight"], eps)
        m = p + ("block_sparse_moe." if p + "block_sparse_moe.gate.weight" in W else "mlp.")
        probs = (h @ W[m + "gate.weight"].T).softmax(-1)
        wts, idx = probs.topk(K, -1)
        wts = wts / wts.sum(-1, keepdim=True)
        if m + "experts.gate_up_proj" in W:
            gu, dn = W[m + "experts.gate_up_proj"], W[m + "experts.down_proj"]
            I = gu.shape[1] // 2
            ex = [(gu[e, :I], gu[e, I:], dn[e]) for e in range(E)]
        else:  # per expert: w1 gate, w3 up, w2 down
            ex = [(W[f"{m}experts.{e}.w1.weight"], W[f"{m}experts.{e}.w3.weight"], W[f"{m}experts.{e}.w2.weight"])
                  for e in range(E)]
        out = torch.zeros_like(h)
        for t in range(T):
            for j in range(K):
                out[t] += wts[t, j] * swiglu(h[t], *ex[int(idx[t, j])])
        al, be = ab["mlp"]
        x = al * h + be * out
    x = rms(x, W["model.norm.weight"], eps)
    return x @ W["lm_head.weight"].T


# ----------------------------------------------------------------------------------------------
# Building, saving, reloading
# ----------------------------------------------------------------------------------------------
def hf_config(cfg_fn, t):
    c = cfg_fn(t)
    c._attn_implementation = "eager"
    c._experts_implementation = "eager"
    return c


def build_minimax(cfg_fn, t, seed, gains, rotary: bool):
    torch.manual_seed(seed)
    model = MiniMaxForCausalLM(hf_config(cfg_fn, t))
    randomise(model, seed, gains)
    if rotary:
        patch_minimax_original(model, M1_ROTARY_DIM)
    return model.eval()


def build_ring(cfg_dict, seed, gains):
    torch.manual_seed(seed)
    model = ring.BailingMoeLinearV2ForCausalLM(ring.config_from_dict(cfg_dict))
    randomise(model, seed, gains)
    return model.eval()


def load_minimax_hf(hf_dir: str) -> MiniMaxForCausalLM:
    model = MiniMaxForCausalLM.from_pretrained(hf_dir, dtype=torch.float32, attn_implementation="eager",
                                               experts_implementation="eager")
    model.eval()
    with torch.no_grad():  # mmap'd safetensors are not 64-byte aligned; BLAS rounding depends on alignment
        for p in model.parameters():
            p.data = p.data.clone()
        for b in model.buffers():
            b.data = b.data.clone()
    assert model.config._attn_implementation == "eager"
    return model


def m1_tensor_names(c: MiniMaxConfig) -> set[str]:
    names = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
    for i, a in enumerate(M1_ATTN_TYPES):
        p = f"model.layers.{i}."
        names |= {p + "input_layernorm.weight", p + "post_attention_layernorm.weight",
                  p + "block_sparse_moe.gate.weight"}
        names |= {f"{p}block_sparse_moe.experts.{e}.{w}.weight" for e in range(c.num_local_experts)
                  for w in ("w1", "w2", "w3")}
        sub = ("qkv_proj", "output_gate", "norm", "out_proj") if a == 0 else ("q_proj", "k_proj", "v_proj", "o_proj")
        names |= {f"{p}self_attn.{s}.weight" for s in sub}
    return names


# ----------------------------------------------------------------------------------------------
# One directory
# ----------------------------------------------------------------------------------------------
# Gains per model (on top of GAINS). ring_linear_moe: a sigmoid router with large logits saturates
# several scores near 1, so top-k near-ties are frequent and each flip under bf16 swaps an expert
# weighted ~1.25 (routed_scaling_factor 2.5): router 1.0 keeps scores in sigmoid's linear range
# (the expert_bias, std 0.1, then matters for the choice) and expert_write 0.1 keeps a flip's effect
# near the bf16 noise. ring_linear_odd (tied embeddings): as make_golden's dense model, a small
# embedding (else tied logits copy the current token), a strong layer 0 and a final norm ~2.
RING_MOE_GAINS = {"router": 1.0, "expert_write": 0.1}
RING_TIED_GAINS = {"embed": 0.2, "first_layer_write": 2.0, "final_norm_mean": 2.0}

MODELS = {
    # name: (kind, family, config fn, base seed, gains, extra)
    "ring_linear_moe": ("ring", "bailing", ring_moe_config, 4000, RING_MOE_GAINS, {"n_shards": 2}),
    "ring_linear_odd": ("ring", "bailing", ring_odd_config, 5000, RING_TIED_GAINS, {"n_shards": 1}),
    "minimax_moe": ("minimax", "minimax", minimax_moe_config, 6000, {}, {}),
    "minimax_rotary": ("minimax_m1", "minimax", minimax_rotary_hf_config, 7000, {}, {}),
}


def make_model(name: str, out_root: str, n_seeds: int) -> dict:
    kind, family, cfg_fn, base_seed, gains, extra = MODELS[name]
    t = tokenizer_for(family)
    prompt_text, prompt = mg.prompt_ids_from_text(t)
    assert t.decode(prompt) == prompt_text
    is_ring = kind == "ring"
    runners = dict(greedy_fn=ring_greedy, prefill_fn=ring_prefill) if is_ring else {}
    prefill_fn = ring_prefill if is_ring else mg.prefill_logits

    def build(seed):
        if is_ring:
            return build_ring(cfg_fn(t), seed, gains)
        return build_minimax(cfg_fn, t, seed, gains, rotary=kind == "minimax_m1")

    # 1. seed search (make_golden's criteria)
    seed = mg.pick_seed(name, range(base_seed, base_seed + n_seeds), build,
                        lambda m: mg.evaluate(m, prompt, t.specials, **runners))

    # 2. build, save, reload
    out_dir = os.path.join(out_root, name)
    clear_dir(out_dir)
    model = build(seed)
    ref_prefill = prefill_fn(model, prompt)
    with tempfile.TemporaryDirectory() as tmp:
        if is_ring:
            ring.save_dir(model, out_dir, cfg_fn(t), n_shards=extra["n_shards"])
            del model
            model = ring.from_dir(out_dir)
        elif kind == "minimax":
            model.save_pretrained(out_dir)
            del model
            model = load_minimax_hf(out_dir)
        else:  # minimax_m1: HF save -> keep the original-format tensors, write the M1 config.json
            hf_cfg = model.config
            model.save_pretrained(tmp)
            with safe_open(os.path.join(tmp, "model.safetensors"), framework="pt") as f:
                tensors = {k: f.get_tensor(k) for k in f.keys() if k.split(".")[-1] not in LIGHTNING_BUFFERS}
            assert set(tensors) == m1_tensor_names(hf_cfg), sorted(set(tensors) ^ m1_tensor_names(hf_cfg))
            save_file(tensors, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
            with open(os.path.join(out_dir, "config.json"), "w") as f:
                json.dump(minimax_m1_config_json(hf_cfg), f, indent=2, sort_keys=True)
                f.write("\n")
            shutil.copy(os.path.join(tmp, "generation_config.json"), out_dir)
            del model
            # reload: the M1 file under the equivalent `minimax` config.json (the Lightning buffers are
            # missing there, HF recomputes them), then the same patch
            hf_dir = os.path.join(tmp, "hf_equiv")
            os.makedirs(hf_dir)
            hf_config(cfg_fn, t).save_pretrained(hf_dir)
            shutil.copy(os.path.join(out_dir, "model.safetensors"), hf_dir)
            model = load_minimax_hf(hf_dir)
            patch_minimax_original(model, M1_ROTARY_DIM)
    write_tokenizer(t, out_dir)
    for n, p in model.named_parameters():
        assert p.dtype == torch.float32, n

    # 3. golden data from the reloaded model
    prompt_logits = prefill_fn(model, prompt)
    reload_diff = float((prompt_logits - ref_prefill).abs().max())
    assert reload_diff == 0.0, f"{name}: reloaded model differs from the built one ({reload_diff})"
    r = mg.evaluate(model, prompt, t.specials, **runners)
    assert r["ok"], name
    greedy_ids, decode_logits = r["greedy"], r["decode_logits"]
    m = mg.margins(decode_logits)

    # 4. decode path vs one prefill forward; independent reference from the files
    full = prefill_fn(model, prompt + greedy_ids[:-1])
    T = len(prompt)
    dec_vs_prefill = float((full[T - 1:] - decode_logits).abs().max())
    print(f"  [{name}] seed {seed}: min margin {float(m.min()):.4f}; decode vs prefill max|diff| {dec_vs_prefill:.3e}",
          flush=True)
    save_file({"prompt_logits": prompt_logits.contiguous(), "decode_logits": decode_logits.contiguous()},
              os.path.join(out_dir, "golden_logits.safetensors"), metadata={"format": "pt"})
    del model
    ref = independent_check(out_dir, prompt, greedy_ids, prompt_logits, decode_logits)
    assert max(ref["prompt"], ref["decode"]) < 1e-3, (name, ref)

    if is_ring:
        producer = ("tools/ring_reference.py (plain PyTorch; transformers has no Ring-linear class): "
                    "Lightning layers run token by token, attention is a plain masked softmax")
        desc = (f"{producer}. prompt_logits: one forward over prompt_ids from a fresh state, logits at every "
                "position [T, V]. decode_logits: row 0 = the last prefill row, rows 1.. = one-token forwards "
                "continuing the state (KV of the attention layers, S of the Lightning layers); row i chose "
                "greedy_ids[i]. bf16 (key names as make_golden's): the reference model cast to bf16 (matmuls "
                "with weights in bf16, norms / RoPE / recurrence / softmax / routing in fp32) and, separately, "
                "this fp32 model with weights rounded to bf16 reproduce the 16 greedy ids; "
                "*_max_abs_logit_dev[i] = max_v |logit_bf16 - logit_fp32| at greedy step i, teacher-forced. ")
    else:
        producer = f"transformers {transformers.__version__} MiniMaxForCausalLM"
        if kind == "minimax_m1":
            producer += (" run on the equivalent `minimax` config and patched to the original MiniMax-M1 "
                         f"semantics: NeoX RoPE on the first rotary_dim={M1_ROTARY_DIM} dims of each head "
                         "(transformers rotates all head dims), Lightning slopes = ALiBi rule with the "
                         "non-power-of-two fallback * (1 - l/(L-1) + 1e-5) (transformers: 2^(-8(h+1)/H) * "
                         "(1 - l/(L-1+1e-5) + 1e-5))")
        desc = (f"{producer}, fp32 on CPU, eval, no grad, attn_implementation=eager, experts_implementation=eager. "
                f"Lightning prefill: HF's block algorithm (block_size {MINIMAX_COMMON['block_size']}); cached decode: "
                "its recurrence. prompt_logits: one prefill forward over prompt_ids, logits at every position "
                "[T, V]. decode_logits: generate(do_sample=False, output_logits=True) - row i produced greedy_ids[i]. "
                "bf16: the same HF model cast to bf16 (and, separately, this fp32 model with weights rounded to "
                "bf16) reproduces the 16 greedy ids; *_max_abs_logit_dev[i] = max_v |logit_bf16 - logit_fp32| at "
                "greedy step i, teacher-forced on prompt_ids + greedy_ids. ")
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
        "init_gains": dict(GAINS, **gains),
        "prompt_text": prompt_text,
        "greedy_text": t.decode(greedy_ids),
        "notes": desc + "Generated by tools/make_golden_lightning.py; do not edit.",
    }
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)
        f.write("\n")
    for fn in os.listdir(out_dir):
        os.chmod(os.path.join(out_dir, fn), 0o644)
    # the tokenizer as transformers loads it from the directory must agree with the raw one
    mg.check_dir_tokenizer(t, out_dir, prompt_text, prompt)
    size = sum(os.path.getsize(os.path.join(out_dir, fn)) for fn in os.listdir(out_dir))
    return {"name": name, "seed": seed, "min_margin": float(m.min()), "dec_vs_prefill": dec_vs_prefill,
            "size": size, "layout": mg.tensor_layout(out_dir), "T": T, "ref": ref,
            "dev_bf16": (float(r["dev_bf16"].min()), float(r["dev_bf16"].max())),
            "dev_wround": (float(r["dev_wround"].min()), float(r["dev_wround"].max())),
            "robustness": r["robustness"], "tokenizer": t.source}


def independent_check(model_dir: str, prompt, greedy_ids, prompt_logits, decode_logits) -> dict:
    with open(os.path.join(model_dir, "config.json")) as f:
        model_type = json.load(f)["model_type"]
    seq, T = prompt + greedy_ids[:-1], len(prompt)
    res = {}
    if model_type == ring.MODEL_TYPE:
        full = ring_parallel_logits(model_dir, seq)
    else:
        full = minimax_reference_logits(model_dir, seq)
        # the other slope rule, for the record (identical slopes for a power-of-two head count; the
        # layer factors differ by the 1e-5 in transformers' denominator)
        other = "hf" if model_type == "minimax_m1" else "original"

        def vs_golden(alt):
            return float(torch.cat([(alt[:T] - prompt_logits).abs().flatten(),
                                    (alt[T - 1:] - decode_logits).abs().flatten()]).max())
        res["other_slope_rule"] = other
        res["other_slope_rule_vs_golden"] = vs_golden(minimax_reference_logits(model_dir, seq, slope_rule=other))
        if model_type == "minimax_m1":  # what ignoring rotary_dim (transformers 5.23) would give
            res["full_rotary_vs_golden"] = vs_golden(minimax_reference_logits(model_dir, seq, full_rotary=True))
    res["greedy_same"] = full[T - 1:].argmax(-1).tolist() == greedy_ids
    res["prompt"] = float((full[:T] - prompt_logits).abs().max())
    res["decode"] = float((full[T - 1:] - decode_logits).abs().max())
    if not res["greedy_same"]:
        res["prompt"] = res["decode"] = float("inf")
    print(f"  {os.path.basename(model_dir)}: independent reference vs golden max|diff| prompt {res['prompt']:.3e}, "
          f"decode {res['decode']:.3e}" + (f"; with the {res['other_slope_rule']} slope rule "
                                           f"{res['other_slope_rule_vs_golden']:.3e}" if "other_slope_rule" in res else "")
          + (f"; ignoring rotary_dim {res['full_rotary_vs_golden']:.3e}" if "full_rotary_vs_golden" in res else ""),
          flush=True)
    return res


def check_dir(model_dir: str) -> dict:
    with open(os.path.join(model_dir, "golden.json")) as f:
        g = json.load(f)
    with safe_open(os.path.join(model_dir, "golden_logits.safetensors"), framework="pt") as f:
        pl, dl = f.get_tensor("prompt_logits"), f.get_tensor("decode_logits")
    res = independent_check(model_dir, g["prompt_ids"], g["greedy_ids"], pl, dl)
    with open(os.path.join(model_dir, "config.json")) as f:
        if json.load(f)["model_type"] == ring.MODEL_TYPE:  # and the module form, prefill + decode
            m = ring.from_dir(model_dir)
            new, dec = ring_greedy(m, g["prompt_ids"])
            res["module_prompt"] = float((m(g["prompt_ids"]) - pl).abs().max())
            res["module_decode"] = float((dec - dl).abs().max()) if new == g["greedy_ids"] else float("inf")
            print(f"  {os.path.basename(model_dir)}: ring_reference module vs golden prompt {res['module_prompt']:.3e}, "
                  f"decode {res['module_decode']:.3e}")
    return res


def main() -> int:
    mg.require_pinned_transformers()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "models"))
    ap.add_argument("--only", default=None, help="comma-separated directory names")
    ap.add_argument("--seeds", type=int, default=mg.SEED_CANDIDATES)
    ap.add_argument("--check", action="store_true",
                    help="only compare the committed files against the independent plain-torch references")
    args = ap.parse_args()
    names = [n for n in MODELS if not args.only or n in args.only.split(",")]

    if args.check:
        worst = 0.0
        for name in names:
            res = check_dir(os.path.join(args.out, name))
            worst = max([worst] + [v for k, v in res.items() if k in ("prompt", "decode", "module_prompt", "module_decode")])
        print(f"worst max|diff| {worst:.3e}")
        return 0 if worst < 1e-3 else 1

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, threads {torch.get_num_threads()}")
    results = [make_model(n, args.out, args.seeds) for n in names]
    mg.print_report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
