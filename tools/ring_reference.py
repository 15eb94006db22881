#!/usr/bin/env python3
"""Plain-PyTorch reference implementation of Ring-linear-2.0.

    model_type "bailing_moe_linear", architectures ["BailingMoeLinearV2ForCausalLM"]
    (inclusionAI/Ring-mini-linear-2.0, Ring-flash-linear-2.0)

transformers has no class for this architecture (the hub checkpoints ship remote code). This file
is hypic's executable statement of its semantics, written from the public ports in SGLang
(python/sglang/srt/models/bailing_moe_linear.py), vLLM
(vllm/model_executor/layers/mamba/linear/bailing_linear_attn.py) and mlx-lm
(mlx_lm/models/bailing_moe_linear.py). It is deliberately the shortest form, not a fast one:
the linear (Lightning) layers run their recurrence token by token, softmax attention is a plain
masked softmax over all cached keys.

    model = from_dir("tests/models/ring_linear_moe")      # config.json + model*.safetensors
    state = model.new_state()
    logits = model(prompt_ids, state)                      # [T, V] fp32, every position
    logits = model([next_id], state)                       # continue: one decode step

The nn.Module parameter names are exactly the checkpoint's tensor names, so
`safetensors.torch.save_file(model.state_dict(), ...)` writes a real-format checkpoint
(`save_dir` does that, plus config.json).

Semantics (fp32; with bf16 weights the matmuls with weights run in bf16 and everything else —
norms, RoPE, the recurrence, softmax, routing — in fp32):
  layer i is softmax attention iff (i+1) % layer_group_size == 0 or i >= (L // layer_group_size) *
  layer_group_size (trailing layers after the last whole group), else linear (Lightning);
  h = h + mixer(input_layernorm(h)); h = h + mlp(post_attention_layernorm(h)); norm; lm_head.
  RMSNorm: y = w * x / sqrt(mean(x^2) + rms_norm_eps), weight used as is (not 1 + w).
  Linear layer l (MHA, nh heads): qkv = x Wqkv^T (rows [q | k | v], nh*hd each); silu(qkv) if
  linear_silu; per-head RMSNorm of q, k (use_qk_norm); NeoX RoPE on the first rot dims
  (rot = rotary_dim if given, else int(hd * partial_rotary_factor)); q *= hd^-0.5;
  S_t = lambda_h S_{t-1} + k_t v_t^T, o_t = S_t^T q_t with lambda_h = exp(-slope_h * factor_l);
  o -> group RMSNorm (group_norm_size contiguous channel groups) * g_norm.weight
    -> * sigmoid(x Wg^T) -> dense.
  Attention layer: q, k, v from query_key_value ([q nh*hd | k nkv*hd | v nkv*hd]); per-head
  RMSNorm of q, k; the same partial NeoX RoPE; causal GQA softmax (scale hd^-0.5); dense.
  MoE (layers >= first_k_dense_replace): sigmoid/softmax scores of fp32 router logits, + expert_bias
  for the choice only, group-limited top-k, weights = unbiased scores (renormalised if
  norm_topk_prob) * routed_scaling_factor, plus the shared experts (no gate).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

MODEL_TYPE = "bailing_moe_linear"
ARCHITECTURE = "BailingMoeLinearV2ForCausalLM"


# ----------------------------------------------------------------------------------------------
# Config
# ----------------------------------------------------------------------------------------------
@dataclass
class RingConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int          # dense MLP width (layers < first_k_dense_replace)
    num_hidden_layers: int
    num_attention_heads: int        # q heads of every layer; also k/v heads of the linear layers (MHA)
    num_key_value_heads: int        # k/v heads of the softmax-attention layers (GQA)
    head_dim: int
    rotary_dim: int                 # NeoX RoPE on dims [0, rotary_dim) of each head, both layer kinds
    rope_theta: float
    rms_norm_eps: float
    max_position_embeddings: int
    layer_group_size: int
    group_norm_size: int
    linear_silu: bool
    use_qk_norm: bool
    first_k_dense_replace: int
    num_experts: int | None
    num_experts_per_tok: int
    num_shared_experts: int
    moe_intermediate_size: int
    moe_shared_expert_intermediate_size: int
    moe_router_enable_expert_bias: bool
    n_group: int
    topk_group: int
    norm_topk_prob: bool
    routed_scaling_factor: float
    score_function: str             # "sigmoid" | "softmax"
    tie_word_embeddings: bool

    def is_attention_layer(self, i: int) -> bool:
        g, L = self.layer_group_size, self.num_hidden_layers
        return (i + 1) % g == 0 or i >= (L // g) * g

    def is_moe_layer(self, i: int) -> bool:
        return self.num_experts is not None and self.num_experts > 1 and i >= self.first_k_dense_replace


def config_from_dict(d: dict) -> RingConfig:
    """RingConfig from a Ring-linear-2.0 config.json dict (its keys; defaults as the ports use them)."""
    if d.get("model_type", MODEL_TYPE) != MODEL_TYPE:
        raise ValueError(f"model_type {d.get('model_type')!r} is not {MODEL_TYPE!r}")
    if d.get("architectures", [ARCHITECTURE]) != [ARCHITECTURE]:
        raise ValueError(f"architectures {d.get('architectures')} is not [{ARCHITECTURE!r}]")
    if d.get("rope_scaling") is not None:
        raise ValueError("rope_scaling must be null")
    if d.get("use_qkv_bias", False) or d.get("use_bias", False):
        raise ValueError("use_qkv_bias / use_bias must be false")
    if d.get("hidden_act", "silu") != "silu":
        raise ValueError("hidden_act must be silu")
    if d.get("router_dtype", "fp32") not in ("fp32", None):
        raise ValueError("router_dtype must be fp32")
    if d.get("num_nextn_predict_layers", 0) not in (0, None):
        raise ValueError("num_nextn_predict_layers > 0 (MTP layers) is not supported")
    score = d.get("score_function", "softmax") or "softmax"
    if score not in ("sigmoid", "softmax"):
        raise ValueError(f"score_function {score!r}")
    H, nh = d["hidden_size"], d["num_attention_heads"]
    hd = d.get("head_dim") or H // nh
    # An explicit rotary_dim wins over partial_rotary_factor (SGLang, vLLM).
    rot = d["rotary_dim"] if d.get("rotary_dim") is not None else int(hd * d.get("partial_rotary_factor", 1.0))
    if rot % 2 or not 0 < rot <= hd:
        raise ValueError(f"rotary_dim {rot} must be even and in (0, head_dim]")
    moe_i = d.get("moe_intermediate_size")
    cfg = RingConfig(
        vocab_size=d["vocab_size"],
        hidden_size=H,
        intermediate_size=d["intermediate_size"],
        num_hidden_layers=d["num_hidden_layers"],
        num_attention_heads=nh,
        num_key_value_heads=d.get("num_key_value_heads") or nh,
        head_dim=hd,
        rotary_dim=rot,
        rope_theta=float(d["rope_theta"]),
        rms_norm_eps=float(d["rms_norm_eps"]),
        max_position_embeddings=d.get("max_position_embeddings", 4096),
        layer_group_size=d["layer_group_size"],
        group_norm_size=d.get("group_norm_size", 1) or 1,
        # SGLang also accepts the spelling use_linear_silu
        linear_silu=bool(d.get("linear_silu", d.get("use_linear_silu", False))),
        use_qk_norm=bool(d.get("use_qk_norm", False)),
        first_k_dense_replace=d.get("first_k_dense_replace", 0) or 0,
        num_experts=d.get("num_experts"),
        num_experts_per_tok=d.get("num_experts_per_tok", 1),
        num_shared_experts=d.get("num_shared_experts", 0) or 0,
        moe_intermediate_size=moe_i,
        # SGLang sizes the shared expert as moe_intermediate_size * num_shared_experts regardless;
        # mlx-lm (and the hub code) use this key. Equal in the real checkpoints.
        moe_shared_expert_intermediate_size=d.get("moe_shared_expert_intermediate_size") or moe_i,
        moe_router_enable_expert_bias=bool(d.get("moe_router_enable_expert_bias", False)),
        n_group=d.get("n_group", 1) or 1,
        topk_group=d.get("topk_group", 1) or 1,
        norm_topk_prob=bool(d.get("norm_topk_prob", True)),
        routed_scaling_factor=float(d.get("routed_scaling_factor", 1.0)),
        score_function=score,
        tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
    )
    if nh % cfg.num_key_value_heads:
        raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
    if (nh * hd) % cfg.group_norm_size:
        raise ValueError("group_norm_size must divide num_attention_heads * head_dim")
    if cfg.num_experts and cfg.num_experts > 1:
        if cfg.num_experts % cfg.n_group or not 0 < cfg.topk_group <= cfg.n_group:
            raise ValueError("n_group must divide num_experts and 0 < topk_group <= n_group")
    return cfg


# ----------------------------------------------------------------------------------------------
# Pieces
# ----------------------------------------------------------------------------------------------
def alibi_slopes(n: int) -> list[float]:
    """ALiBi head slopes. n a power of two: 2^(-8(h+1)/n). Otherwise, with P = 2^floor(log2 n):
    the P slopes of that rule, then the first n - P of every other slope (indices 0, 2, 4, ...)
    of the rule for 2P."""
    def pow2(m: int) -> list[float]:
        return [2.0 ** (-8.0 * (h + 1) / m) for h in range(m)]
    if n & (n - 1) == 0:
        return pow2(n)
    p = 1 << (n.bit_length() - 1)
    return pow2(p) + pow2(2 * p)[0::2][: n - p]


def lightning_decay(cfg: RingConfig, layer: int) -> torch.Tensor:
    """Per-head decay lambda_h = exp(-slope_h * factor) of linear layer `layer` (0-based, counting all
    layers), factor = 1 - layer / (L - 1) + 1e-5 (1 + 1e-5 when L <= 1). That is SGLang's and
    vLLM's convention; mlx-lm uses max(0, layer - 1) in place of layer."""
    L = cfg.num_hidden_layers
    factor = 1.0 + 1e-5 if L <= 1 else 1.0 - layer / (L - 1) + 1e-5
    s = torch.tensor(alibi_slopes(cfg.num_attention_heads), dtype=torch.float32) * factor  # fp32, as the ports
    return torch.exp(-s)


def rope(x: torch.Tensor, pos: torch.Tensor, cfg: RingConfig) -> torch.Tensor:
    """NeoX rotation (pairs j, j + rot/2) of dims [0, rot) of each head; x [T, heads, hd]."""
    rot = cfg.rotary_dim
    inv_freq = 1.0 / cfg.rope_theta ** (torch.arange(0, rot, 2, dtype=torch.float32) / rot)
    ang = pos.to(torch.float32)[:, None] * inv_freq[None, :]           # [T, rot/2]
    cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    xf = x.float()
    x1, x2 = xf[..., : rot // 2], xf[..., rot // 2: rot]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, xf[..., rot:]], -1).to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, n: int, eps: float, groups: int = 1):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps, self.groups = eps, groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # groups > 1: the last dim splits into `groups` contiguous groups, each normalised by its own RMS
        xf = x.float().unflatten(-1, (self.groups, -1))
        y = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).flatten(-2)
        return self.weight * y.to(x.dtype)


def linear(n_in: int, n_out: int) -> nn.Linear:
    return nn.Linear(n_in, n_out, bias=False)


class MLP(nn.Module):
    def __init__(self, H: int, inter: int):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = linear(H, inter), linear(H, inter), linear(inter, H)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Router(nn.Module):
    def __init__(self, cfg: RingConfig):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(cfg.num_experts, cfg.hidden_size))
        if cfg.moe_router_enable_expert_bias:
            self.expert_bias = nn.Parameter(torch.zeros(cfg.num_experts))
        else:
            self.expert_bias = None


def route(logits: torch.Tensor, bias: torch.Tensor | None, cfg: RingConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 router logits [T, E] -> (expert ids [T, k], weights [T, k]). Ties go to the lower index."""
    T, E = logits.shape
    scores = logits.sigmoid() if cfg.score_function == "sigmoid" else logits.softmax(-1)
    choice = scores if bias is None else scores + bias.float()
    if cfg.n_group > 1:
        grouped = choice.view(T, cfg.n_group, E // cfg.n_group)
        group_score = grouped.sort(dim=-1, descending=True).values[..., :2].sum(-1)         # [T, n_group]
        keep = group_score.sort(dim=-1, descending=True, stable=True).indices[:, : cfg.topk_group]
        kept = torch.zeros(T, cfg.n_group, dtype=torch.bool).scatter_(1, keep, True)
        # Excluded experts get -inf (SGLang, vLLM). mlx-lm writes 0.0 there instead, which differs
        # when a kept expert's choice value is negative (sigmoid score + negative bias).
        choice = choice.masked_fill(~kept.repeat_interleave(E // cfg.n_group, dim=1), float("-inf"))
    idx = choice.sort(dim=-1, descending=True, stable=True).indices[:, : cfg.num_experts_per_tok]
    w = scores.gather(1, idx)                                                          # unbiased scores
    if cfg.norm_topk_prob:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    return idx, w * cfg.routed_scaling_factor


class MoE(nn.Module):
    def __init__(self, cfg: RingConfig):
        super().__init__()
        self.cfg = cfg
        H = cfg.hidden_size
        self.gate = Router(cfg)
        self.experts = nn.ModuleList([MLP(H, cfg.moe_intermediate_size) for _ in range(cfg.num_experts)])
        if cfg.num_shared_experts > 0:
            self.shared_experts = MLP(H, cfg.moe_shared_expert_intermediate_size * cfg.num_shared_experts)
        else:
            self.shared_experts = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = x.float() @ self.gate.weight.float().T                    # router_dtype fp32
        idx, w = route(logits, self.gate.expert_bias, self.cfg)
        out = torch.zeros(x.shape, dtype=torch.float32)
        for e, expert in enumerate(self.experts):
            tok, slot = torch.where(idx == e)
            if len(tok):
                out.index_add_(0, tok, expert(x[tok]).float() * w[tok, slot, None])
        if self.shared_experts is not None:
            out = out + self.shared_experts(x).float()                     # added without a gate
        return out.to(x.dtype)


class LinearAttention(nn.Module):
    """Lightning (linear) attention layer: MHA, per-head scalar decay, no chunking here."""

    def __init__(self, cfg: RingConfig, layer: int):
        super().__init__()
        self.cfg, self.layer = cfg, layer
        H, nh, hd = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim
        self.query_key_value = linear(H, 3 * nh * hd)
        if cfg.use_qk_norm:
            self.query_layernorm = RMSNorm(hd, cfg.rms_norm_eps)
            self.key_layernorm = RMSNorm(hd, cfg.rms_norm_eps)
        self.g_proj = linear(H, nh * hd)
        self.g_norm = RMSNorm(nh * hd, cfg.rms_norm_eps, groups=cfg.group_norm_size)
        self.dense = linear(nh * hd, H)

    def forward(self, x: torch.Tensor, pos: torch.Tensor, st: dict) -> torch.Tensor:
        cfg, T = self.cfg, x.shape[0]
        nh, hd = cfg.num_attention_heads, cfg.head_dim
        qkv = self.query_key_value(x)
        if cfg.linear_silu:
            qkv = F.silu(qkv)
        q, k, v = qkv.view(T, 3, nh, hd).unbind(1)                         # [q all heads | k | v]
        if cfg.use_qk_norm:
            q, k = self.query_layernorm(q), self.key_layernorm(k)
        q, k = rope(q, pos, cfg), rope(k, pos, cfg)
        q = q.float() * hd ** -0.5
        k, v = k.float(), v.float()
        lam = lightning_decay(cfg, self.layer)[:, None, None]               # [nh, 1, 1]
        S = st.setdefault("S", torch.zeros(nh, hd, hd))                     # [nh, hd_k, hd_v], fp32
        o = torch.empty(T, nh, hd)
        for t in range(T):
            S = lam * S + k[t, :, :, None] * v[t, :, None, :]
            o[t] = torch.einsum("hk,hkv->hv", q[t], S)
        st["S"] = S
        o = self.g_norm(o.reshape(T, nh * hd).to(x.dtype)) * torch.sigmoid(self.g_proj(x))
        return self.dense(o)


class Attention(nn.Module):
    """Softmax attention layer: GQA, per-head q/k RMSNorm, partial NeoX RoPE, no output gate."""

    def __init__(self, cfg: RingConfig, layer: int):
        super().__init__()
        self.cfg, self.layer = cfg, layer
        H, nh, nkv, hd = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.query_key_value = linear(H, (nh + 2 * nkv) * hd)
        if cfg.use_qk_norm:
            self.query_layernorm = RMSNorm(hd, cfg.rms_norm_eps)
            self.key_layernorm = RMSNorm(hd, cfg.rms_norm_eps)
        self.dense = linear(nh * hd, H)

    def forward(self, x: torch.Tensor, pos: torch.Tensor, st: dict) -> torch.Tensor:
        cfg, T = self.cfg, x.shape[0]
        nh, nkv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        q, k, v = self.query_key_value(x).split([nh * hd, nkv * hd, nkv * hd], -1)
        q, k, v = q.view(T, nh, hd), k.view(T, nkv, hd), v.view(T, nkv, hd)
        if cfg.use_qk_norm:
            q, k = self.query_layernorm(q), self.key_layernorm(k)
        q, k = rope(q, pos, cfg), rope(k, pos, cfg)
        K = st["K"] = torch.cat([st.get("K", k[:0]), k])                    # all keys so far [S, nkv, hd]
        V = st["V"] = torch.cat([st.get("V", v[:0]), v])
        kv_of = torch.arange(nh) // (nh // nkv)                              # q head h reads kv head h // (nh / nkv)
        s = torch.einsum("thd,shd->hts", q.float(), K[:, kv_of].float()) * hd ** -0.5
        key_pos = torch.arange(K.shape[0])
        s = s.masked_fill(key_pos[None, None, :] > pos[None, :, None], float("-inf"))
        o = torch.einsum("hts,shd->thd", s.softmax(-1), V[:, kv_of].float())
        return self.dense(o.reshape(T, nh * hd).to(x.dtype))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: RingConfig, i: int):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.attention = Attention(cfg, i) if cfg.is_attention_layer(i) else LinearAttention(cfg, i)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MoE(cfg) if cfg.is_moe_layer(i) else MLP(cfg.hidden_size, cfg.intermediate_size)

    def forward(self, h: torch.Tensor, pos: torch.Tensor, st: dict) -> torch.Tensor:
        h = h + self.attention(self.input_layernorm(h), pos, st)
        return h + self.mlp(self.post_attention_layernorm(h))


class BailingMoeLinearV2Model(nn.Module):
    def __init__(self, cfg: RingConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList([DecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class RingState:
    """Decode state: the position of the next token, per linear layer S [nh, hd, hd] (fp32),
    per attention layer the K / V of every token so far."""

    def __init__(self, n_layers: int):
        self.pos = 0
        self.layers: list[dict] = [{} for _ in range(n_layers)]


class BailingMoeLinearV2ForCausalLM(nn.Module):
    def __init__(self, cfg: RingConfig):
        super().__init__()
        self.config = cfg
        self.model = BailingMoeLinearV2Model(cfg)
        # tied: no lm_head.weight in the file (and none in state_dict()); the embedding is the head
        self.lm_head = None if cfg.tie_word_embeddings else linear(cfg.hidden_size, cfg.vocab_size)

    def new_state(self) -> RingState:
        return RingState(self.config.num_hidden_layers)

    @torch.no_grad()
    def forward(self, ids, state: RingState | None = None) -> torch.Tensor:
        """Logits [T, V] (fp32) at every position of `ids` (a list or 1-D tensor), continuing from
        `state` (updated in place); state None: a fresh sequence."""
        state = state or self.new_state()
        ids = torch.as_tensor(ids, dtype=torch.long).reshape(-1)
        pos = torch.arange(state.pos, state.pos + len(ids))
        h = self.model.word_embeddings(ids)
        for layer, st in zip(self.model.layers, state.layers):
            h = layer(h, pos, st)
        state.pos += len(ids)
        h = self.model.norm(h)
        w = self.model.word_embeddings.weight if self.lm_head is None else self.lm_head.weight
        return (h @ w.T).float()


# ----------------------------------------------------------------------------------------------
# Files
# ----------------------------------------------------------------------------------------------
def load_tensors(model_dir: str) -> dict[str, torch.Tensor]:
    """All tensors of model.safetensors, or of the shards listed in model.safetensors.index.json."""
    from safetensors import safe_open
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    W: dict[str, torch.Tensor] = {}
    for fn in files:
        with safe_open(os.path.join(model_dir, fn), framework="pt") as f:
            for k in f.keys():
                W[k] = f.get_tensor(k).clone()  # own, aligned memory (BLAS rounding depends on alignment)
    return W


def from_dir(model_dir: str, dtype: torch.dtype = torch.float32) -> BailingMoeLinearV2ForCausalLM:
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = config_from_dict(json.load(f))
    model = BailingMoeLinearV2ForCausalLM(cfg)
    W = load_tensors(model_dir)
    if cfg.tie_word_embeddings:
        W.pop("lm_head.weight", None)  # tied: a stray lm_head.weight is ignored (as SGLang does)
    expected = model.state_dict()
    missing, unexpected = sorted(set(expected) - set(W)), sorted(set(W) - set(expected))
    if missing or unexpected:
        raise ValueError(f"{model_dir}: missing tensors {missing}, unexpected tensors {unexpected}")
    for k, v in W.items():
        if tuple(v.shape) != tuple(expected[k].shape):
            raise ValueError(f"{k}: shape {tuple(v.shape)}, config says {tuple(expected[k].shape)}")
    model.load_state_dict({k: v.to(dtype) for k, v in W.items()}, strict=True)
    return model.to(dtype).eval()


def save_dir(model: BailingMoeLinearV2ForCausalLM, out_dir: str, config: dict, n_shards: int = 1) -> list[str]:
    """config.json (`config` as given, keys sorted) + the state dict as fp32 safetensors: one
    model.safetensors, or n_shards files model-0000i-of-0000n.safetensors + model.safetensors.index.json
    (split in state-dict order). Returns the tensor names."""
    from safetensors.torch import save_file
    assert config_from_dict(config) == model.config, "config.json would not describe this model"
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    sd = {k: v.detach().to(torch.float32).contiguous() for k, v in model.state_dict().items()}
    if n_shards == 1:
        save_file(sd, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
        return sorted(sd)
    total = sum(v.numel() * 4 for v in sd.values())
    shards: list[dict[str, torch.Tensor]] = [{} for _ in range(n_shards)]
    done = 0
    for k, v in sd.items():
        shards[min(n_shards - 1, done * n_shards // total)][k] = v
        done += v.numel() * 4
    weight_map = {}
    for i, part in enumerate(shards):
        fn = f"model-{i + 1:05d}-of-{n_shards:05d}.safetensors"
        save_file(part, os.path.join(out_dir, fn), metadata={"format": "pt"})
        weight_map.update({k: fn for k in part})
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")
    return sorted(sd)


if __name__ == "__main__":
    import sys
    if len(sys.argv) != 2:
        sys.exit("usage: ring_reference.py MODEL_DIR   (prints the greedy continuation of its golden prompt)")
    m = from_dir(sys.argv[1])
    with open(os.path.join(sys.argv[1], "golden.json")) as f:
        g = json.load(f)
    st = m.new_state()
    logits = m(g["prompt_ids"], st)
    out = []
    for _ in range(len(g["greedy_ids"])):
        out.append(int(logits[-1].argmax()))
        logits = m([out[-1]], st)
    print("greedy", out, "matches golden.json" if out == g["greedy_ids"] else "DIFFERS from golden.json")
