"""The independent plain-torch reference of the KDA + MLA hybrids (Kimi-Linear, Ling-3.0): reads only
config.json + *.safetensors and runs the semantics tools/make_golden_kda.py documents, token by token.
Dev-only; imported by make_golden_kda.py (its goldens are checked against it)."""
from __future__ import annotations


import make_golden as mg

import torch

F = torch.nn.functional


# ----------------------------------------------------------------------------------------------
# Independent reference: plain torch, reading only config.json + *.safetensors, token by token
# ----------------------------------------------------------------------------------------------
def kimi_layer_types(cfg: dict) -> list[str]:
    L, lac = cfg["num_hidden_layers"], cfg["linear_attn_config"]
    types = [None] * L
    for i in lac["full_attn_layers"]:
        types[i - 1] = "full_attention"   # 1-indexed
    for i in lac["kda_layers"]:
        types[i - 1] = "linear_attention"
    assert None not in types, types
    return types


class Arch:
    """What the reference reads from config.json (hub keys first, then the keys transformers 5.23 writes)."""

    def __init__(self, cfg: dict):
        self.cfg, mt = cfg, cfg["model_type"]
        self.kimi = mt == "kimi_linear"
        assert self.kimi or mt == "bailing_hybrid", mt
        L = self.L = cfg["num_hidden_layers"]
        self.eps = cfg["rms_norm_eps"]
        if self.kimi:
            lac = cfg["linear_attn_config"]
            self.H, self.d, self.Kc = lac["num_heads"], lac["head_dim"], lac["short_conv_kernel_size"]
            self.types = kimi_layer_types(cfg)
            self.n_dense = cfg.get("first_k_dense_replace", 1)
            self.E, self.top_k = cfg["num_experts"], cfg["num_experts_per_token"]
            self.n_group, self.topk_group = cfg["num_expert_group"], cfg["topk_group"]
            self.renorm, self.n_shared = cfg["moe_renormalize"], cfg["num_shared_experts"]
            self.theta = None                                  # no RoPE
        else:
            # transformers writes head_dim = qk_rope_head_dim and the KDA head dim as linear_head_dim
            self.H = cfg.get("linear_num_heads", cfg["num_attention_heads"])
            self.d = cfg.get("linear_head_dim", cfg["head_dim"])
            self.Kc = cfg.get("linear_conv_kernel_dim", cfg["short_conv_kernel_size"])
            g = cfg["layer_group_size"]
            self.types = ["full_attention" if (i + 1) % g == 0 else "linear_attention" for i in range(L)]
            self.n_dense = cfg["first_k_dense_replace"]
            self.E = cfg.get("num_experts", cfg.get("num_local_experts"))
            self.top_k = cfg.get("num_experts_per_token", cfg.get("num_experts_per_tok"))
            self.n_group = cfg.get("num_expert_group", cfg.get("n_group"))
            self.topk_group = cfg["topk_group"]
            self.renorm = cfg.get("moe_renormalize", cfg.get("norm_topk_prob"))
            self.n_shared = cfg.get("num_shared_experts", cfg.get("n_shared_experts"))
            rp = cfg.get("rope_parameters") or {}
            assert rp.get("rope_type", "default") == "default", rp
            self.theta = rp.get("rope_theta", cfg.get("rope_theta"))
            self.safe_gate, self.lower_bound = cfg["kda_safe_gate"], cfg["kda_lower_bound"]
        if cfg.get("layer_types") is not None:
            assert cfg["layer_types"] == self.types, (cfg["layer_types"], self.types)
        self.dense = [i < self.n_dense for i in range(L)]
        if cfg.get("mlp_layer_types") is not None:
            assert cfg["mlp_layer_types"] == ["dense" if x else "sparse" for x in self.dense]
        self.nh, self.r, self.qr = cfg["num_attention_heads"], cfg["kv_lora_rank"], cfg.get("q_lora_rank")
        self.dn, self.dr, self.dv = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
        assert cfg.get("num_key_value_heads", self.nh) == self.nh
        self.scale = cfg["routed_scaling_factor"]
        # Ling-3.0's per-layer SwiGLU limits of the routed / shared experts (absent or 0: none)
        self.limits = cfg.get("expert_swiglu_limit_list") or [0] * L
        self.limits_shared = cfg.get("share_expert_swiglu_limit_list") or [0] * L


def pick(W: dict, *names: str) -> torch.Tensor:
    for n in names:
        if n in W:
            return W[n]
    raise KeyError(names[0])


def has(W: dict, *names: str) -> bool:
    return any(n in W for n in names)


def rms(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def swiglu(x, wg, wu, wd, limit=0.0):
    """SwiGLU; a non-zero limit clamps silu(gate) from above and up to [-limit, limit] (Ling-3.0)."""
    g, u = F.silu(x @ wg.T), x @ wu.T
    if limit:
        g, u = g.clamp(max=limit), u.clamp(min=-limit, max=limit)
    return (g * u) @ wd.T


def l2n(x):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def softplus(x):
    return torch.where(x > 20.0, x, torch.log1p(torch.exp(torch.clamp(x, max=20.0))))


@torch.no_grad()
def reference_logits(model_dir: str, ids: list[int], stats: dict | None = None,
                     dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Logits [T, V] at every position of `ids`, from config.json + *.safetensors only (any of the layouts:
    hub / save_pretrained default / transformers' internal save_original_format=False names). dtype float64
    gives the exact semantics (transformers' own fp32 rounding then shows as golden vs fp64)."""
    cfg, W = mg.load_checkpoint(model_dir)
    W = {n: w.to(dtype).clone() for n, w in W.items()}  # own, aligned storage: BLAS rounding depends on alignment
    a = Arch(cfg)
    T = len(ids)
    H, d, Kc = a.H, a.d, a.Kc
    stats = stats if stats is not None else {}
    stats.setdefault("zero_mask_routing_differs", 0)
    stats.setdefault("routed_tokens", 0)

    def kda(h, p):
        s = p + ("self_attn." if has(W, p + "self_attn.q_proj.weight") else "attention.")
        fg = s + ("forget_gate." if has(W, s + "forget_gate.A_log") else "")
        q, k, v = h @ W[s + "q_proj.weight"].T, h @ W[s + "k_proj.weight"].T, h @ W[s + "v_proj.weight"].T
        if s + "conv1d.weight" in W:
            cw = W[s + "conv1d.weight"][:, 0, :]
        else:
            cw = torch.cat([W[s + n + "_conv1d.weight"][:, 0, :] for n in "qkv"], 0)
        u = torch.cat([q, k, v], 1)
        up = torch.cat([torch.zeros(Kc - 1, u.shape[1], dtype=dtype), u], 0)
        y = torch.zeros_like(u)
        for j in range(Kc):
            y = y + cw[:, j] * up[j:j + T]
        y = F.silu(y)
        q, k, v = (y[:, i * H * d:(i + 1) * H * d].reshape(T, H, d) for i in range(3))
        q, k = l2n(q) * d ** -0.5, l2n(k)
        beta = torch.sigmoid(h @ W[s + "b_proj.weight"].T)                       # [T, H]
        A = torch.exp(W[fg + "A_log"].reshape(H))
        dt = W[fg + "dt_bias"].reshape(H, d)
        if a.kimi:
            f = (h @ W[fg + "f_a_proj.weight"].T) @ W[fg + "f_b_proj.weight"].T
            gl = -A[:, None] * softplus(f.reshape(T, H, d) + dt)
        else:
            f = (h @ W[fg + "f_proj.weight"].T).reshape(T, H, d) + dt
            if a.safe_gate:
                gl = a.lower_bound * torch.sigmoid(A[:, None] * f)
            else:
                gl = -A[:, None] * softplus(f)
        S = torch.zeros(H, d, d, dtype=dtype)                                   # [head, key ch, value ch]
        o = torch.empty(T, H, d, dtype=dtype)
        for t in range(T):
            S = S * torch.exp(gl[t])[:, :, None]
            delta = beta[t][:, None] * (v[t] - torch.einsum("hk,hkv->hv", k[t], S))
            S = S + k[t][:, :, None] * delta[:, None, :]
            o[t] = torch.einsum("hk,hkv->hv", q[t], S)
        if a.kimi:
            z = (h @ W[s + "g_a_proj.weight"].T) @ W[s + "g_b_proj.weight"].T
        else:
            z = h @ W[s + "g_proj.weight"].T
        o = rms(o, W[s + "o_norm.weight"], a.eps) * torch.sigmoid(z.reshape(T, H, d))
        return o.reshape(T, H * d) @ pick(W, s + "o_proj.weight", s + "dense.weight").T

    def rope_interleaved(x, pos):
        """x [..., T, dr] (pairs (2i, 2i+1) in place), angle pos * theta^(-2i/dr)."""
        dr = x.shape[-1]
        inv = 1.0 / (a.theta ** (torch.arange(0, dr, 2, dtype=dtype) / dr))
        ang = pos.to(dtype)[:, None] * inv[None, :]
        c, sn = torch.cos(ang), torch.sin(ang)
        ev, od = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = ev * c - od * sn
        out[..., 1::2] = od * c + ev * sn
        return out

    def mla(h, p):
        s = p + ("self_attn." if has(W, p + "self_attn.kv_b_proj.weight") else "attention.")
        nh, dn, dr, dv, r = a.nh, a.dn, a.dr, a.dv, a.r
        if s + "q_a_proj.weight" in W:
            q = rms(h @ W[s + "q_a_proj.weight"].T, W[s + "q_a_layernorm.weight"], 1e-6) @ W[s + "q_b_proj.weight"].T
        else:
            q = h @ W[s + "q_proj.weight"].T
        q = q.reshape(T, nh, dn + dr)
        ckv = h @ W[s + "kv_a_proj_with_mqa.weight"].T
        c, k_rot = rms(ckv[:, :r], W[s + "kv_a_layernorm.weight"], 1e-6), ckv[:, r:]
        kv = (c @ W[s + "kv_b_proj.weight"].T).reshape(T, nh, dn + dv)
        k_nope, v = kv[..., :dn], kv[..., dn:]
        q_nope, q_rot = q[..., :dn], q[..., dn:]
        if a.theta is not None:
            pos = torch.arange(T)
            q_rot = rope_interleaved(q_rot.transpose(0, 1), pos).transpose(0, 1)
            k_rot = rope_interleaved(k_rot, pos)
        qf = torch.cat([q_nope, q_rot], -1)                                     # [T, nh, dn + dr]
        kf = torch.cat([k_nope, k_rot[:, None, :].expand(T, nh, dr)], -1)
        sc = torch.einsum("thd,shd->hts", qf, kf) * (dn + dr) ** -0.5
        sc = sc.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        o = torch.einsum("hts,shd->thd", sc.softmax(-1), v)                      # [T, nh, dv]
        if s + "g_proj.weight" in W:                                            # Ling: head-wise gate
            o = o * torch.sigmoid(h @ W[s + "g_proj.weight"].T)[..., None]
        return o.reshape(T, nh * dv) @ pick(W, s + "o_proj.weight", s + "dense.weight").T

    def experts(m):
        if m + "experts.gate_up_proj" in W:                                    # internal packed layout
            gu, dn_ = W[m + "experts.gate_up_proj"], W[m + "experts.down_proj"]
            I = gu.shape[1] // 2
            return [(gu[e, :I].clone(), gu[e, I:].clone(), dn_[e].clone()) for e in range(a.E)]
        if m + "experts.0.w1.weight" in W:                                     # Kimi hub: w1 gate, w3 up, w2 down
            return [(W[f"{m}experts.{e}.w1.weight"], W[f"{m}experts.{e}.w3.weight"], W[f"{m}experts.{e}.w2.weight"])
                    for e in range(a.E)]
        return [(W[f"{m}experts.{e}.gate_proj.weight"], W[f"{m}experts.{e}.up_proj.weight"],
                 W[f"{m}experts.{e}.down_proj.weight"]) for e in range(a.E)]

    def route(ch_row):
        """DeepSeek-V3 group-limited top-k on one token's choice scores; -inf for dropped groups.
        Returns (experts, experts with the remote code's 0.0 mask)."""
        E, ng = a.E, a.n_group
        gs = E // ng
        gsc = [sum(sorted(ch_row[j * gs:(j + 1) * gs], reverse=True)[:2]) for j in range(ng)]
        keep = set(sorted(range(ng), key=lambda j: (-gsc[j], j))[:a.topk_group])
        out = []
        for fill in (float("-inf"), 0.0):
            c = [ch_row[e] if e // gs in keep else fill for e in range(E)]
            out.append(sorted(range(E), key=lambda e: (-c[e], e))[:a.top_k])
        return out

    def mlp(h, p, dense, i):
        m = p + ("mlp." if has(W, p + "mlp.gate.weight", p + "mlp.gate_proj.weight") else "block_sparse_moe.")
        if dense:
            return swiglu(h, W[m + "gate_proj.weight"], W[m + "up_proj.weight"], W[m + "down_proj.weight"])
        logits = h @ W[m + "gate.weight"].T
        sc = torch.sigmoid(logits)
        choice = sc + pick(W, m + "gate.e_score_correction_bias", m + "gate.expert_bias")
        ex = experts(m)
        out = torch.zeros_like(h)
        for t in range(T):
            top, top0 = route(choice[t].tolist())
            stats["routed_tokens"] += 1
            stats["zero_mask_routing_differs"] += int(sorted(top) != sorted(top0))
            w = sc[t, top]
            if a.renorm:
                w = w / (w.sum() + 1e-20)
            w = w * a.scale
            for j, e in enumerate(top):
                out[t] += w[j] * swiglu(h[t], *ex[e], limit=a.limits[i])
        sp = m + "shared_experts."
        if a.n_shared and W[sp + "gate_proj.weight"].numel():
            out = out + swiglu(h, W[sp + "gate_proj.weight"], W[sp + "up_proj.weight"], W[sp + "down_proj.weight"],
                               limit=a.limits_shared[i])
        return out

    x = pick(W, "model.embed_tokens.weight", "model.word_embeddings.weight")[torch.tensor(ids)]
    for i in range(a.L):
        p = f"model.layers.{i}."
        h = rms(x, W[p + "input_layernorm.weight"], a.eps)
        x = x + (kda(h, p) if a.types[i] == "linear_attention" else mla(h, p))
        x = x + mlp(rms(x, W[p + "post_attention_layernorm.weight"], a.eps), p, a.dense[i], i)
    return rms(x, W["model.norm.weight"], a.eps) @ W["lm_head.weight"].T
