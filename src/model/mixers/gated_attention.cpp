// Full attention over the pieces of a pass (gated_attention.h: gated or plain):
//   h += o_proj(attn(rope(qnorm(q)), rope(knorm(k)), v) [⊙ σ(gate)]).
// Cached bodies' keys/values are placed into the KV cache at their true positions (RoPE
// applied there); computed rows attend causally to everything before them. Pieces run in
// prompt order, so an arriving entry (EntryGate) holds up only the pieces after it.
#include "model/mixers/gated_attention.h"

#include <cmath>
#include <cstdio>
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
namespace {

enum : size_t { kK, kV };  // LayerState::rows

class GatedAttention final : public TokenMixer {
 public:
  GatedAttention(const ModelConfig& c, const TokenMixerType& type, AttnWeights w)
      : type_(type), gated_(&type == &gated_attention_type()), w_(std::move(w)),
        rope_(int(c.rotary_dim()), float(c.rope_theta)), nh_(int(c.num_attention_heads)),
        nkv_(int(c.num_key_value_heads)), hd_(int(c.head_dim)), eps_(c.rms_norm_eps),
        zero_centred_(c.zero_centred_norms) {}

  const TokenMixerType& type() const override { return type_; }
  int64_t history_tokens() const override { return 0; }

  // rows: k, v [capacity, nkv, hd], k normed and rotated at the token's position.
  LayerState new_state(int64_t capacity) const override {
    LayerState s;
    s.rows = {{"k", Tensor::zeros_f32({capacity, nkv_, hd_})},
              {"v", Tensor::zeros_f32({capacity, nkv_, hd_})}};
    return s;
  }

  double flops(int64_t L, int64_t past) const override {
    const double H = double(w_.qkv.dim(1));
    double f = 2.0 * L * H * double(w_.qkv.dim(0));
    f += 2.0 * L * double(w_.o_proj.dim(0)) * double(w_.o_proj.dim(1));
    // scores and weighted values: each query sees past + its causal prefix.
    const double keys = double(L) * double(past) + double(L) * double(L + 1) / 2;
    return f + 2.0 * 2.0 * keys * nh_ * hd_;
  }

  // Entry layer: the body's k, v [Lb, nkv, hd] (k normed where the model norms it, not
  // rotated); no transition.
  Status check_entry(const SegmentEntry& e, const SegmentEntry::Layer& l) const override {
    const Shape kv = {e.body_tokens(), nkv_, hd_};
    HYPIC_RETURN_IF_ERROR(check_entry_tensors(l, type(), {{"k", kv}, {"v", kv}}));
    if (l.T) return invalid_argument("an attention layer has no transition");
    return Status::ok();
  }

  Status forward(const float* x, int64_t R, float* h, Model::Pass& pass) const override;

 private:
  const TokenMixerType& type_;
  bool gated_;  // per head [query | gate] rows and the output × σ(gate)
  AttnWeights w_;
  kernels::Rope rope_;
  int nh_, nkv_, hd_;
  double eps_;
  bool zero_centred_;
};

Status GatedAttention::forward(const float* x, int64_t R, float* h, Model::Pass& pass) const {
  HYPIC_PROFILE_SCOPE("attn_layer");
  const AttnWeights& w = w_;
  const size_t li = size_t(pass.layer);
  const int nh = nh_, nkv = nkv_, hd = hd_;
  const int64_t qh = gated_ ? 2 * hd : hd;  // projection rows per query head
  const int64_t qw = int64_t(nh) * qh, kw = int64_t(nkv) * hd, width = qw + 2 * kw;
  const kernels::Rope& rope = rope_;
  Workspace& ws = Workspace::local();
  Tensor proj = ws.f32(slot::kAttnProj, {R, width});
  kernels::linear(x, R, w.qkv, proj.f32());
  // q, gate: [R, nh, hd]; normed k and v: [R, nkv, hd].
  Tensor q = ws.f32(slot::kAttnQ, {R, nh, hd});
  Tensor gate = gated_ ? ws.f32(slot::kAttnGate, {R, nh, hd}) : Tensor();
  Tensor kn = ws.f32(slot::kAttnK, {R, nkv, hd}), vn = ws.f32(slot::kAttnV, {R, nkv, hd});
  parallel_for(R, [&](int64_t t) {
    const float* row = proj.f32() + t * width;
    for (int hh = 0; hh < nh; ++hh) {
      std::memcpy(q.f32() + (t * nh + hh) * hd, row + hh * qh, size_t(hd) * 4);
      if (gated_)
        std::memcpy(gate.f32() + (t * nh + hh) * hd, row + hh * qh + hd, size_t(hd) * 4);
    }
    std::memcpy(kn.f32() + t * kw, row + qw, size_t(kw) * 4);
    std::memcpy(vn.f32() + t * kw, row + qw + kw, size_t(kw) * 4);
  });
  if (!w.q_norm.empty()) {
    kernels::rmsnorm(q.f32(), w.q_norm.f32(), q.f32(), R * nh, hd, eps_, zero_centred_);
    kernels::rmsnorm(kn.f32(), w.k_norm.f32(), kn.f32(), R * nkv, hd, eps_, zero_centred_);
  }
  if (pass.capture) {  // body keys (normed, not rotated) and values
    SegmentEntry::Layer& e = pass.capture->layers[li];
    const int64_t b0 = pass.seam, n = R - b0;
    Tensor ek = Tensor::zeros_f32({n, nkv, hd}), ev = Tensor::zeros_f32({n, nkv, hd});
    std::memcpy(ek.raw(), kn.f32() + b0 * kw, ek.nbytes());
    std::memcpy(ev.raw(), vn.f32() + b0 * kw, ev.nbytes());
    e.put("k", std::move(ek));
    e.put("v", std::move(ev));
  }
  // Pieces in prompt order: each piece's keys and values go into the cache (cached bodies
  // rotated to their positions), then a computed piece attends causally to everything up to
  // its own end — all placed already, so an arriving entry is waited for only when the
  // pieces before it are done (and the batched decode attends after the loop).
  Tensor o = ws.f32(slot::kAttnOut, {R, nh, hd});
  const float scale = 1.0f / std::sqrt(float(hd));
  for (const Model::Pass::Piece& p : pass.pieces) {
    if (p.gate) HYPIC_RETURN_IF_ERROR(p.gate->wait(pass.layer));
    LayerState& kv = p.seq->layers[li];
    const Tensor &kcache = kv.rows[kK].t, &vcache = kv.rows[kV].t;
    float* kc = kcache.f32() + p.pos0 * kw;
    float* vc = vcache.f32() + p.pos0 * kw;
    const int64_t n = p.tokens();
    // An entry's k, v shapes were checked when it met this model (check_entry).
    const SegmentEntry::Layer* e = p.entry ? &p.entry->layers[li] : nullptr;
    const float* ksrc = e ? e->find("k")->f32() : kn.f32() + p.row0 * kw;
    const float* vsrc = e ? e->find("v")->f32() : vn.f32() + p.row0 * kw;
    std::memcpy(kc, ksrc, size_t(n * kw) * 4);
    std::memcpy(vc, vsrc, size_t(n * kw) * 4);
    // A cached body's keys at their true positions (or, for the rerotate=false diagnostic,
    // where the entry was built: the positions the cache would keep without the patch).
    rope.apply(kc, n, nkv, hd, p.entry && !pass.rerotate ? p.entry->seam : p.pos0);
    if (p.entry) continue;
    rope.apply(q.f32() + p.row0 * nh * hd, p.rows, nh, hd, p.pos0);
    if (pass.batch) continue;
    HYPIC_PROFILE_SCOPE("attn_core");
    kernels::attention_causal({nh, nkv, hd}, q.f32() + p.row0 * nh * hd, p.rows, p.pos0,
                              kcache.f32(), vcache.f32(), p.pos0 + p.rows, scale,
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
      kb[b] = pass.pieces[b].seq->layers[li].rows[kK].t.f32();
      vb[b] = pass.pieces[b].seq->layers[li].rows[kV].t.f32();
    }
    kernels::attention_decode({nh, nkv, hd}, int64_t(B), q.f32(), pos.data(), kb.data(),
                              vb.data(), scale, o.f32());
  }
  if (gated_) {
    float* op = o.f32();
    const float* gp = gate.f32();
    parallel_for(R, [&](int64_t t) {
      for (int64_t i = t * nh * hd; i < (t + 1) * nh * hd; ++i) op[i] *= kernels::sigmoid(gp[i]);
    });
  }
  kernels::linear(o.f32(), R, w.o_proj, h, /*accumulate=*/true);
  return Status::ok();
}

}  // namespace

std::unique_ptr<TokenMixer> make_attention(const ModelConfig& c, const TokenMixerType& type,
                                           AttnWeights w) {
  HYPIC_CHECK(&type == &gated_attention_type() || &type == &attention_type());
  return std::make_unique<GatedAttention>(c, type, std::move(w));
}

namespace {

Status validate_rope(const ModelConfig& c) {
  if (!(c.rope_theta > 0)) return invalid_argument("rope_theta must be positive");
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1))
    return invalid_argument("partial_rotary_factor must be in (0, 1], got " +
                            std::to_string(c.partial_rotary_factor));
  const int64_t rd = c.rotary_dim();
  if (rd <= 0 || rd % 2 != 0)
    return invalid_argument("head_dim " + std::to_string(c.head_dim) + " × partial_rotary_factor " +
                            std::to_string(c.partial_rotary_factor) + " gives " +
                            std::to_string(rd) + " rotary dims; it must be a positive even "
                            "number (NeoX RoPE rotates pairs)");
  if (c.rope_type != "default" && c.rope_type != "mrope")
    return unsupported("rope_type '" + c.rope_type + "' is not supported (hypic implements plain "
                       "RoPE); remove the scaling entry from config.json to run without "
                       "context extension");
  if (!c.mrope_section.empty()) {
    int64_t sum = 0;
    for (int64_t s : c.mrope_section) {
      if (s < 0) return invalid_argument("mrope_section has a negative entry");
      sum += s;
    }
    if (2 * sum != rd)
      return invalid_argument("mrope_section sums to " + std::to_string(sum) + " frequency "
                              "pairs, but there are " + std::to_string(rd) + " rotary dims");
  }
  return Status::ok();
}

// Gated (Qwen) or plain (Ring, MiniMax) attention: the same fields and checks.
class AttentionType final : public TokenMixerType {
 public:
  explicit AttentionType(bool gated) : gated_(gated) {}
  const char* name() const override { return gated_ ? "full attention" : "attention"; }
  const char* id() const override { return gated_ ? "gated_attention" : "attention"; }
  LayerKind state() const override { return LayerKind::kFull; }

  Status validate(const ModelConfig& c) const override {
    const std::string& p = c.text_prefix;
    for (auto [field, v] : {std::pair{"num_attention_heads", c.num_attention_heads},
                            {"num_key_value_heads", c.num_key_value_heads},
                            {"head_dim", c.head_dim}})
      if (v <= 0)
        return invalid_argument("field '" + p + field + "' must be positive, got " +
                                std::to_string(v));
    if (c.num_attention_heads % c.num_key_value_heads != 0)
      return invalid_argument("field '" + p + "num_attention_heads' (" +
                              std::to_string(c.num_attention_heads) + ") must be a multiple of '" +
                              p + "num_key_value_heads' (" + std::to_string(c.num_key_value_heads) +
                              ") for grouped-query attention");
    HYPIC_RETURN_IF_ERROR(validate_rope(c));
    if (c.attention_bias)
      return unsupported("field '" + p + "attention_bias' is true; hypic supports only "
                         "bias-free attention projections");
    return Status::ok();
  }

  int64_t params(const ModelConfig& c) const override {
    const int64_t H = c.hidden_size, qd = c.num_attention_heads * c.head_dim;
    const int64_t kvd = c.num_key_value_heads * c.head_dim;
    const int64_t norms = gated_ || c.attn_qk_norm ? 2 * c.head_dim : 0;
    return H * (gated_ ? 2 : 1) * qd + 2 * H * kvd + qd * H + norms;  // q(+gate), k, v, o, norms
  }

  std::string describe(const ModelConfig& c) const override {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s: %lld heads, %lld KV heads, head_dim %lld, RoPE on "
                  "%lld dims (theta %.0f)%s, max positions %lld",
                  gated_ ? "attention (output gate)" : "attention",
                  (long long)c.num_attention_heads, (long long)c.num_key_value_heads,
                  (long long)c.head_dim, (long long)c.rotary_dim(), c.rope_theta,
                  gated_ || c.attn_qk_norm ? ", q/k norm" : "",
                  (long long)c.max_position_embeddings);
    return buf;
  }

 private:
  bool gated_;
};

}  // namespace

const TokenMixerType& gated_attention_type() {
  static const AttentionType t(true);
  return t;
}

const TokenMixerType& attention_type() {
  static const AttentionType t(false);
  return t;
}

}  // namespace hypic
