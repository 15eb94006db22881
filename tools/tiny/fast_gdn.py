"""A faster, differentiable drop-in for transformers' `torch_chunk_gated_delta_rule` (training only).

Same maths and the same signature as the Hugging Face torch fallback (chunk 64, UT/WY form, fp32
inside; SPEC.md §2), organised for speed on a CPU with autograd:
  * one triangular solve with the right-hand sides [β·v | β·e^G·k] concatenated (HF does two);
  * the sequential scan over chunks collects the per-chunk outputs in a list and stacks them once
    (HF writes into slices of a preallocated tensor, which autograd turns into many copies);
  * pairwise decays e^{G_i - G_j} are computed once and shared by the UT system and the intra-chunk
    attention.
The model that is trained stays a standard `Qwen3_5ForCausalLM`; `install()` only swaps the kernel
function the HF layer calls, and `check()` compares outputs and gradients with HF's fallback.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def _l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def fast_chunk_gated_delta_rule(query, key, value, g, beta, chunk_size: int = 64, initial_state=None,
                                output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
                                **kwargs):
    initial_dtype = query.dtype
    B, T, nk, dk = key.shape
    nv, dv = value.shape[-2:]
    if nk != nv:
        query = query.repeat_interleave(nv // nk, dim=2)
        key = key.repeat_interleave(nv // nk, dim=2)
    q, k, v, b, gg = [x.transpose(1, 2).to(torch.float32, memory_format=torch.contiguous_format)
                      for x in (query, key, value, beta, g)]
    if use_qk_l2norm_in_kernel:
        q = _l2norm(q)
        k = _l2norm(k)
    q = q * (q.shape[-1] ** -0.5)
    C = chunk_size
    pad = (C - T % C) % C
    if pad:
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        b, gg = (F.pad(x, (0, pad)) for x in (b, gg))
    N = (T + pad) // C
    q = q.reshape(B, nv, N, C, dk)
    k = k.reshape(B, nv, N, C, dk)
    v = v.reshape(B, nv, N, C, dv)
    b = b.reshape(B, nv, N, C, 1)
    G = gg.reshape(B, nv, N, C).cumsum(-1)                       # within-chunk cumulative log decay
    upper = torch.ones(C, C, dtype=torch.bool, device=q.device).triu(1)
    pair = (G.unsqueeze(-1) - G.unsqueeze(-2)).masked_fill(upper, float("-inf")).exp()   # e^{G_i-G_j}, i>=j
    kb = k * b
    ut = (kb @ k.transpose(-1, -2)) * pair                         # solve uses its strict lower part only
    rhs = torch.cat([v * b, kb * G.exp().unsqueeze(-1)], dim=-1)
    sol = torch.linalg.solve_triangular(ut, rhs, upper=False, unitriangular=True)
    u, w = sol[..., :dv], sol[..., dv:]                            # U = Tm·βV,  W = Tm·(β e^G K)
    attn = (q @ k.transpose(-1, -2)) * pair                        # intra-chunk q·k with decay, i>=j
    qd = q * G.exp().unsqueeze(-1)
    kd = k * (G[..., -1:] - G).exp().unsqueeze(-1)
    cd = G[..., -1].exp()[..., None, None]
    if initial_state is None:
        S = torch.zeros(B, nv, dk, dv, dtype=torch.float32, device=q.device)
    else:
        S = initial_state.to(torch.float32)
    outs = []
    for i in range(N):
        v_new = u[:, :, i] - w[:, :, i] @ S
        outs.append(qd[:, :, i] @ S + attn[:, :, i] @ v_new)
        S = S * cd[:, :, i] + kd[:, :, i].transpose(-1, -2) @ v_new
    o = torch.stack(outs, dim=2).reshape(B, nv, N * C, dv)[:, :, :T]
    o = o.transpose(1, 2).to(initial_dtype, memory_format=torch.contiguous_format)
    return o, (S if output_final_state else None)


def install() -> None:
    """Make every transformers Qwen3.5 / Qwen3-Next GDN layer use fast_chunk_gated_delta_rule."""
    import transformers.models.qwen3_5.modeling_qwen3_5 as m35
    m35.torch_chunk_gated_delta_rule = fast_chunk_gated_delta_rule


def check(seed: int = 0, T: int = 200, nk: int = 2, nv: int = 4, dk: int = 32, dv: int = 48) -> float:
    """Max relative difference of outputs, final state and input gradients vs HF's fallback (fp32)."""
    import transformers.models.qwen3_5.modeling_qwen3_5 as m35
    ref_fn = getattr(m35.torch_chunk_gated_delta_rule, "__wrapped__", m35.torch_chunk_gated_delta_rule)
    if ref_fn is fast_chunk_gated_delta_rule:
        raise RuntimeError("check() must run before install()")
    gen = torch.Generator().manual_seed(seed)
    def mk(*s):
        return torch.randn(*s, generator=gen, dtype=torch.float64).float().requires_grad_(True)
    q, k = mk(2, T, nk, dk), mk(2, T, nk, dk)
    v = mk(2, T, nv, dv)
    g = (-torch.rand(2, T, nv, generator=gen) * 0.7).requires_grad_(True)
    bt = torch.rand(2, T, nv, generator=gen).requires_grad_(True)
    s0 = torch.randn(2, nv, dk, dv, generator=gen) * 0.1
    worst = 0.0
    res = []
    for fn in (ref_fn, fast_chunk_gated_delta_rule):
        o, s = fn(q, k, v, g, bt, initial_state=s0, output_final_state=True, use_qk_l2norm_in_kernel=True)
        gr = torch.autograd.grad((o * torch.cos(o.detach() * 3)).sum() + s.sum(), [q, k, v, g, bt])
        res.append([o, s, *gr])
    for a, b in zip(*res):
        worst = max(worst, ((a - b).abs().max() / (a.abs().max() + 1e-12)).item())
    return worst
