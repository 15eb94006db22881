// Gated full attention over the pieces of a pass:
//   h += o_proj(attn(rope(qnorm(q)), rope(knorm(k)), v) ⊙ σ(gate)).
// Cached bodies' keys/values are placed into the KV cache at their true positions (RoPE
// applied there); computed rows attend causally to everything before them. Pieces run in
// prompt order, so an arriving entry (EntryGate) holds up only the pieces after it.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "core/profile.h"
#include "core/workspace.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/rope.h"
#include "model/pass.h"
#include "model/slots.h"

namespace hypic {

Status Model::attn_layer(const LayerWeights& lw, const float* x, int64_t R, float* h, Pass& pass,
                       size_t ai) const {
  HYPIC_PROFILE_SCOPE("attn_layer");
  const auto& c = cfg_;
  const AttnWeights& w = lw.attn;
  const int nh = int(c.num_attention_heads), nkv = int(c.num_key_value_heads);
  const int hd = int(c.head_dim);
  const int64_t qw = int64_t(nh) * 2 * hd, kw = int64_t(nkv) * hd, width = qw + 2 * kw;
  const auto& rope = *static_cast<const kernels::Rope*>(rope_.get());
  Workspace& ws = Workspace::local();
  Tensor proj = ws.f32(slot::kAttnProj, {R, width});
  kernels::linear(x, R, w.qkv, proj.f32());
  // q, gate: [R, nh, hd]; normed k and v: [R, nkv, hd].
  Tensor q = ws.f32(slot::kAttnQ, {R, nh, hd}), gate = ws.f32(slot::kAttnGate, {R, nh, hd});
  Tensor kn = ws.f32(slot::kAttnK, {R, nkv, hd}), vn = ws.f32(slot::kAttnV, {R, nkv, hd});
  parallel_for(R, [&](int64_t t) {
    const float* row = proj.f32() + t * width;
    for (int hh = 0; hh < nh; ++hh) {
      std::memcpy(q.f32() + (t * nh + hh) * hd, row + int64_t(hh) * 2 * hd, size_t(hd) * 4);
      std::memcpy(gate.f32() + (t * nh + hh) * hd, row + int64_t(hh) * 2 * hd + hd,
                  size_t(hd) * 4);
    }
    std::memcpy(kn.f32() + t * kw, row + qw, size_t(kw) * 4);
    std::memcpy(vn.f32() + t * kw, row + qw + kw, size_t(kw) * 4);
  });
  kernels::rmsnorm(q.f32(), w.q_norm.f32(), q.f32(), R * nh, hd, c.rms_norm_eps, true);
  kernels::rmsnorm(kn.f32(), w.k_norm.f32(), kn.f32(), R * nkv, hd, c.rms_norm_eps, true);
  if (pass.capture) {  // body keys (normed, not rotated) and values
    SegmentEntry::Attn& e = pass.capture->attn[ai];
    const int64_t b0 = pass.seam, n = R - b0;
    e.k = Tensor::zeros_f32({n, nkv, hd});
    e.v = Tensor::zeros_f32({n, nkv, hd});
    std::memcpy(e.k.raw(), kn.f32() + b0 * kw, e.k.nbytes());
    std::memcpy(e.v.raw(), vn.f32() + b0 * kw, e.v.nbytes());
  }
  // Pieces in prompt order: each piece's keys and values go into the cache (cached bodies
  // rotated to their positions), then a computed piece attends causally to everything up to
  // its own end — all placed already, so an arriving entry is waited for only when the
  // pieces before it are done (and the batched decode attends after the loop).
  Tensor o = ws.f32(slot::kAttnOut, {R, nh, hd});
  const float scale = 1.0f / std::sqrt(float(hd));
  for (const Pass::Piece& p : pass.pieces) {
    if (p.gate) HYPIC_RETURN_IF_ERROR(p.gate->wait(pass.layer));
    KvCache& kv = p.seq->kv[ai];
    float* kc = kv.k.f32() + p.pos0 * kw;
    float* vc = kv.v.f32() + p.pos0 * kw;
    const int64_t n = p.tokens();
    const float* ksrc = p.entry ? p.entry->attn[ai].k.f32() : kn.f32() + p.row0 * kw;
    const float* vsrc = p.entry ? p.entry->attn[ai].v.f32() : vn.f32() + p.row0 * kw;
    std::memcpy(kc, ksrc, size_t(n * kw) * 4);
    std::memcpy(vc, vsrc, size_t(n * kw) * 4);
    rope.apply(kc, n, nkv, hd, p.pos0);
    if (p.entry) continue;
    rope.apply(q.f32() + p.row0 * nh * hd, p.rows, nh, hd, p.pos0);
    if (pass.batch) continue;
    HYPIC_PROFILE_SCOPE("attn_core");
    kernels::attention_causal({nh, nkv, hd}, q.f32() + p.row0 * nh * hd, p.rows, p.pos0,
                              kv.k.f32(), kv.v.f32(), p.pos0 + p.rows, scale,
                              o.f32() + p.row0 * nh * hd);
  }
  if (pass.batch) {
    // One query per sequence, each over its own cache: one parallel region for all.
    HYPIC_PROFILE_SCOPE("attn_core");
    const size_t B = pass.pieces.size();
    std::vector<int64_t> pos(B);
    std::vector<const float*> kb(B), vb(B);
    for (size_t b = 0; b < B; ++b) {
      pos[b] = pass.pieces[b].pos0;
      kb[b] = pass.pieces[b].seq->kv[ai].k.f32();
      vb[b] = pass.pieces[b].seq->kv[ai].v.f32();
    }
    kernels::attention_decode({nh, nkv, hd}, int64_t(B), q.f32(), pos.data(), kb.data(),
                              vb.data(), scale, o.f32());
  }
  float* op = o.f32();
  const float* gp = gate.f32();
  parallel_for(R, [&](int64_t t) {
    for (int64_t i = t * nh * hd; i < (t + 1) * nh * hd; ++i) op[i] *= kernels::sigmoid(gp[i]);
  });
  kernels::linear(o.f32(), R, w.o_proj, h, /*accumulate=*/true);
  return Status::ok();
}

}  // namespace hypic
