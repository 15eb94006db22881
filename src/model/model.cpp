#include "model/model.h"

#include "core/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <new>

#include "core/workspace.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "model/mixer.h"
#include "model/pass.h"
#include "model/slots.h"

namespace hypic {

using kernels::linear;

namespace {

// h ← α·(r.from_norm ? x : h) + β·mixer(x) (weights.h: Residual), where `mixer(out)` adds
// its output to out [R, H]. The plain pre-norm form accumulates into h directly.
template <typename Mixer>
Status add_residual(const Residual& r, const float* x, int64_t R, int64_t H, float* h,
                    Mixer&& mixer) {
  if (r.plain()) return mixer(h);
  Tensor t = Workspace::local().f32(slot::kResidual, {R, H});
  float* m = t.f32();
  std::fill(m, m + R * H, 0.0f);
  HYPIC_RETURN_IF_ERROR(mixer(m));
  const float a = r.alpha, b = r.beta;
  const float* base = r.from_norm ? x : h;
  for (int64_t i = 0; i < R * H; ++i) h[i] = a * base[i] + b * m[i];
  return Status::ok();
}

}  // namespace

SeqState Model::new_state(int64_t capacity) const {
  SeqState s;
  s.layers.reserve(w_.layers.size());
  for (const DecoderLayer& l : w_.layers) s.layers.push_back(l.token->new_state(capacity));
  return s;
}

void Model::reserve(SeqState& s, int64_t need) const {
  const int64_t have = s.capacity();
  if (need <= have) return;
  int64_t cap = std::max<int64_t>(have, 64);
  while (cap < need) cap *= 2;
  for (LayerState& l : s.layers)
    for (NamedTensor& r : l.rows) {
      Shape shape = r.t.shape();
      shape[0] = cap;
      Tensor grown = Tensor::zeros(r.t.dtype(), shape);
      std::memcpy(grown.raw(), r.t.raw(), r.t.nbytes());
      r.t = std::move(grown);
    }
}

Status Model::check_state(const SeqState& s) const {
  const auto bad = [](const std::string& what) {
    return invalid_argument("the state was made for another model (" + what +
                            "); create it with this model's new_state()");
  };
  if (s.layers.size() != layout_.layers.size())
    return bad(std::to_string(s.layers.size()) + " layers, the model has " +
               std::to_string(layout_.layers.size()));
  const int64_t cap = s.capacity();
  for (size_t i = 0; i < s.layers.size(); ++i) {
    const LayerState &a = s.layers[i], &want = layout_.layers[i];
    auto same = [](const std::vector<NamedTensor>& x, const std::vector<NamedTensor>& y,
                   int64_t rows) {
      if (x.size() != y.size()) return false;
      for (size_t j = 0; j < x.size(); ++j) {
        const Tensor &t = x[j].t, &u = y[j].t;
        if (x[j].name != y[j].name || t.empty() || t.dtype() != u.dtype() || t.ndim() != u.ndim())
          return false;
        for (int d = 0; d < t.ndim(); ++d)
          if (t.dim(d) != (d == 0 && rows >= 0 ? rows : u.dim(d))) return false;
      }
      return true;
    };
    if (!same(a.fixed, want.fixed, -1) || !same(a.rows, want.rows, cap))
      return bad("layer " + std::to_string(i) + "'s tensors differ");
  }
  return Status::ok();
}

Status Model::forward(SeqState& st, const std::vector<int32_t>& tokens, LogitsFor which,
                      std::vector<float>* logits) const {
  ForwardPlan plan;
  plan.tokens = tokens;
  plan.pieces.push_back({int64_t(tokens.size()), nullptr});
  return forward_plan(st, plan, which, logits);
}

Status Model::forward_plan(SeqState& st, const ForwardPlan& plan, LogitsFor which,
                           std::vector<float>* logits) const {
  const auto& c = cfg_;
  Pass pass;
  pass.rule = plan.rule;
  pass.rerotate = plan.rerotate;
  pass.trace = plan.trace_last_piece;
  if (plan.cancelled) pass.cancelled = &plan.cancelled;
  HYPIC_RETURN_IF_ERROR(check_state(st).with_context("forward"));
  int64_t row = 0, pos = st.pos;
  for (const ForwardPiece& p : plan.pieces) {
    if (p.entry) {
      const SegmentEntry& e = *p.entry;
      if (p.rows != 0) return invalid_argument("forward: a cached piece computes no rows");
      // An arriving entry's layers are checked as they arrive (set_entry_layer).
      if (Status s = p.gate ? check_entry_layers(e) : check_entry(e); !s.is_ok())
        return s.with_context("forward: segment entry " + e.key);
    } else if (p.rows <= 0) {
      return invalid_argument("forward: a computed piece needs at least one token");
    }
    Pass::Piece q;
    q.seq = &st;
    q.row0 = row;
    q.rows = p.rows;
    q.pos0 = pos;
    q.entry = p.entry;
    q.gate = p.entry ? p.gate : nullptr;
    pass.pieces.push_back(q);
    row += p.rows;
    pos += q.tokens();
  }
  if (row != int64_t(plan.tokens.size()) || row == 0)
    return invalid_argument("forward: the plan's pieces do not cover its tokens");
  if (pos > c.max_position_embeddings)
    return out_of_range("sequence of " + std::to_string(pos) +
                        " tokens exceeds the model's context of " +
                        std::to_string(c.max_position_embeddings) + " tokens; shorten the prompt");
  return run_pass(plan.tokens, pass, which, logits);
}

Status Model::run_pass(const std::vector<int32_t>& tokens, Pass& pass, LogitsFor which,
                       std::vector<float>* logits) const {
  try {
    return run_layers(tokens, pass, which, logits);
  } catch (const std::bad_alloc&) {
    return internal_error("the forward pass ran out of memory; shorten the prompt or lower "
                          "the batch and cache sizes");
  } catch (const std::exception& e) {
    return internal_error(std::string("the forward pass failed: ") + e.what());
  }
}

Status Model::run_layers(const std::vector<int32_t>& tokens, Pass& pass, LogitsFor which,
                         std::vector<float>* logits) const {
  const auto& c = cfg_;
  const int64_t R = int64_t(tokens.size()), H = c.hidden_size;
  for (int32_t t : tokens)
    if (t < 0 || t >= c.vocab_size)
      return out_of_range("token id " + std::to_string(t) + " outside the vocabulary [0, " +
                          std::to_string(c.vocab_size) + ")");
  // Each sequence ends where its last piece ends (pieces of one sequence are in order).
  std::vector<std::pair<SeqState*, int64_t>> ends;
  for (const Pass::Piece& p : pass.pieces) {
    auto it = std::find_if(ends.begin(), ends.end(),
                           [&](const auto& e) { return e.first == p.seq; });
    if (it == ends.end()) it = ends.insert(ends.end(), {p.seq, 0});
    it->second = p.pos0 + p.tokens();
  }
  for (auto& [seq, end] : ends) reserve(*seq, end);

  Workspace& ws = Workspace::local();
  Tensor h = ws.f32(slot::kHidden, {R, H});
  const DType et = w_.embed.dtype();  // as stored: a float type, or a GGUF file's blocks
  const size_t erow = dtype_row_bytes(et, H);
  for (int64_t t = 0; t < R; ++t) {
    const char* row = static_cast<const char*>(w_.embed.raw()) + size_t(tokens[size_t(t)]) * erow;
    if (dtype_packed(et)) dequantize_row(et, row, H, h.f32() + t * H);
    else to_f32(et, row, h.f32() + t * H, size_t(H));
  }
  Tensor x = ws.f32(slot::kNormed, {R, H});
  const bool zc = c.zero_centred_norms;
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    if (pass.cancelled && (*pass.cancelled)())
      return Status(StatusCode::kCancelled, "the forward pass was cancelled (the client left, or the server is stopping)");
    const DecoderLayer& lw = w_.layers[size_t(i)];
    pass.layer = i;
    kernels::rmsnorm(h.f32(), lw.input_norm.f32(), x.f32(), R, H, c.rms_norm_eps, zc);
    HYPIC_RETURN_IF_ERROR(add_residual(lw.token_residual, x.f32(), R, H, h.f32(), [&](float* out) {
      return lw.token->forward(x.f32(), R, out, pass);
    }));
    if (pass.on_captured) pass.on_captured(i);
    // The last layer's MLP only feeds the logits: an entry build needs none.
    if (pass.capture && i + 1 == c.num_hidden_layers) break;
    kernels::rmsnorm(h.f32(), lw.post_norm.f32(), x.f32(), R, H, c.rms_norm_eps, zc);
    (void)add_residual(lw.channel_residual, x.f32(), R, H, h.f32(), [&](float* out) {
      lw.channel->forward(x.f32(), R, out);
      return Status::ok();
    });
    if (pass.trace) {
      const int64_t r0 = pass.pieces.back().row0;
      pass.trace->emplace_back(h.f32() + r0 * H, h.f32() + R * H);
    }
  }
  for (auto& [seq, end] : ends) seq->pos = end;
  if (which == LogitsFor::kNone) return Status::ok();
  const int64_t r0 = which == LogitsFor::kLast ? R - 1 : 0, n = R - r0;
  kernels::rmsnorm(h.f32() + r0 * H, w_.final_norm.f32(), x.f32(), n, H, c.rms_norm_eps, zc);
  logits->assign(size_t(n * c.vocab_size), 0.0f);
  linear(x.f32(), n, w_.lm_head, logits->data());
  return Status::ok();
}

Status Model::self_test() const {
  const int64_t L = std::min<int64_t>(20, cfg_.max_position_embeddings - 1);
  if (L < 1) return Status::ok();
  std::vector<int32_t> tokens(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) tokens[size_t(i)] = int32_t(i % cfg_.vocab_size);
  SeqState st = new_state(L + 1);
  std::vector<float> logits;
  Status s = forward(st, tokens, LogitsFor::kLast, &logits);
  if (s.is_ok()) s = decode_batch({&st}, {tokens[0]}, &logits);
  return s.with_context("the kernel self-test at start-up");
}

double Model::forward_flops(int64_t L, int64_t past, bool logits_last_only) const {
  double f = 0;
  for (const DecoderLayer& l : w_.layers) f += l.token->flops(L, past) + l.channel->flops(L);
  f += 2.0 * (logits_last_only ? 1 : L) * double(cfg_.hidden_size) * double(cfg_.vocab_size);
  return f;
}

}  // namespace hypic
