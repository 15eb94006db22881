#include "kernels/transition.h"

#include <cmath>
#include <cstring>

#include "core/parallel.h"
#include "core/status.h"
#include "kernels/gemm.h"

namespace hypic::kernels {

const char* transition_form_name(TransitionForm f) {
  switch (f) {
    case TransitionForm::kIdentity: return "identity";
    case TransitionForm::kLogScalar: return "log-scalar";
    case TransitionForm::kLogVector: return "log-vector";
    case TransitionForm::kDense: return "dense";
  }
  return "?";
}

Transition Transition::identity(TransitionForm form, int nv, int dk) {
  Transition t;
  t.form = form;
  t.nv = nv;
  t.dk = dk;
  switch (form) {
    case TransitionForm::kIdentity: break;
    case TransitionForm::kLogScalar: t.data.assign(size_t(nv), 0.0f); break;
    case TransitionForm::kLogVector: t.data.assign(size_t(nv) * dk, 0.0f); break;
    case TransitionForm::kDense:
      t.data.assign(size_t(nv) * dk * dk, 0.0f);
      for (int h = 0; h < nv; ++h)
        for (int i = 0; i < dk; ++i) t.data[(size_t(h) * dk + i) * dk + i] = 1.0f;
      break;
  }
  return t;
}

namespace {

// out = T·state (+ s0 when given), per head.
void apply_impl(const Transition& T, int dv, const float* state, const float* s0, float* out) {
  const int nv = T.nv, dk = T.dk;
  const size_t hs = size_t(dk) * dv;
  switch (T.form) {
    case TransitionForm::kIdentity:
      for (size_t i = 0; i < size_t(nv) * hs; ++i) out[i] = state[i] + (s0 ? s0[i] : 0.0f);
      return;
    case TransitionForm::kLogScalar:
      parallel_for(nv, [&](int64_t h) {
        const float a = std::exp(T.data[size_t(h)]);
        for (size_t i = size_t(h) * hs; i < size_t(h + 1) * hs; ++i)
          out[i] = a * state[i] + (s0 ? s0[i] : 0.0f);
      });
      return;
    case TransitionForm::kLogVector:
      parallel_for(nv, [&](int64_t h) {
        for (int r = 0; r < dk; ++r) {
          const float a = std::exp(T.data[size_t(h) * dk + r]);
          const size_t o = size_t(h) * hs + size_t(r) * dv;
          for (int c = 0; c < dv; ++c) out[o + c] = a * state[o + c] + (s0 ? s0[o + c] : 0.0f);
        }
      });
      return;
    case TransitionForm::kDense:
      if (s0) std::memcpy(out, s0, size_t(nv) * hs * sizeof(float));
      batched_matmul_f32(nv, dk, dv, dk, T.data.data(), false, state, false, out, s0 != nullptr);
      return;
  }
}

}  // namespace

void transition_apply(const Transition& T, int dv, float* state) {
  std::vector<float> tmp(size_t(T.nv) * T.dk * dv);
  apply_impl(T, dv, state, nullptr, tmp.data());
  std::memcpy(state, tmp.data(), tmp.size() * sizeof(float));
}

void transition_compose(const Transition& T, int dv, const float* s0, float* state) {
  std::vector<float> tmp(size_t(T.nv) * T.dk * dv);
  apply_impl(T, dv, state, s0, tmp.data());
  std::memcpy(state, tmp.data(), tmp.size() * sizeof(float));
}

Transition transition_chain(const Transition& first, const Transition& second) {
  HYPIC_CHECK(first.form == second.form && first.nv == second.nv && first.dk == second.dk,
              "chaining transitions of different forms or sizes");
  Transition r = second;
  switch (first.form) {
    case TransitionForm::kIdentity: break;
    case TransitionForm::kLogScalar:
    case TransitionForm::kLogVector:
      for (size_t i = 0; i < r.data.size(); ++i) r.data[i] = first.data[i] + second.data[i];
      break;
    case TransitionForm::kDense:
      batched_matmul_f32(first.nv, first.dk, first.dk, first.dk, second.data.data(), false,
                         first.data.data(), false, r.data.data());
      break;
  }
  return r;
}

namespace {

// cos/sin of Δ·theta^(−2j/rot), j < rot/2, in double (Δ may be large).
void rotation_table(int rot, float theta, int64_t delta, std::vector<float>& cs,
                    std::vector<float>& sn) {
  const int half = rot / 2;
  cs.resize(size_t(half));
  sn.resize(size_t(half));
  for (int j = 0; j < half; ++j) {
    const double f = double(delta) * std::pow(double(theta), -2.0 * j / rot);
    cs[size_t(j)] = float(std::cos(f));
    sn[size_t(j)] = float(std::sin(f));
  }
}

// Rows (j, j + half) of an [rows, cols] block mixed by the rotation: X ← R·X.
void rotate_rows(float* X, int cols, int half, const float* cs, const float* sn) {
  for (int j = 0; j < half; ++j) {
    float* a = X + size_t(j) * cols;
    float* b = X + size_t(j + half) * cols;
    for (int c = 0; c < cols; ++c) {
      const float x = a[c], y = b[c];
      a[c] = cs[j] * x - sn[j] * y;
      b[c] = cs[j] * y + sn[j] * x;
    }
  }
}

}  // namespace

void rerotate_state(int nv, int dk, int dv, int rot, float theta, int64_t delta, float* state) {
  HYPIC_CHECK(rot % 2 == 0 && rot <= dk);
  if (delta == 0 || rot == 0) return;
  std::vector<float> cs, sn;
  rotation_table(rot, theta, delta, cs, sn);
  parallel_for(nv, [&](int64_t h) {
    rotate_rows(state + size_t(h) * dk * dv, dv, rot / 2, cs.data(), sn.data());
  });
}

bool rerotate_transition(int rot, float theta, int64_t delta, Transition* T) {
  switch (T->form) {
    case TransitionForm::kIdentity:
    case TransitionForm::kLogScalar: return true;  // scalar·I commutes with R
    case TransitionForm::kLogVector: return false;  // Diag(e^t) does not commute with R
    case TransitionForm::kDense: break;
  }
  if (delta == 0 || rot == 0) return true;
  std::vector<float> cs, sn;
  rotation_table(rot, theta, delta, cs, sn);
  const int dk = T->dk, half = rot / 2;
  parallel_for(T->nv, [&](int64_t h) {
    float* t = T->data.data() + size_t(h) * dk * dk;
    rotate_rows(t, dk, half, cs.data(), sn.data());  // R·T
    for (int i = 0; i < dk; ++i) {                   // (R·T)·Rᵀ: columns mix the same way
      float* row = t + size_t(i) * dk;
      for (int j = 0; j < half; ++j) {
        const float x = row[j], y = row[j + half];
        row[j] = cs[size_t(j)] * x - sn[size_t(j)] * y;
        row[j + half] = cs[size_t(j)] * y + sn[size_t(j)] * x;
      }
    }
  });
  return true;
}

}  // namespace hypic::kernels
