// Rotary position embedding, NeoX layout (rotate_half pairs j and j + rot/2), applied to the
// first `rot` dims of each head (partial RoPE); dims rot..hd pass through.
#pragma once

#include <cstdint>
#include <vector>

namespace hypic::kernels {

class Rope {
 public:
  // rot: rotary dims (even), theta: base.
  Rope(int rot, float theta);
  int rot() const { return rot_; }
  // x: [L, nh, hd]; token i sits at position pos0 + i.
  void apply(float* x, int64_t L, int nh, int hd, int64_t pos0) const;
  // Same, explicit positions: pos: [L].
  void apply_at(float* x, int64_t L, int nh, int hd, const int64_t* pos) const;

 private:
  int rot_;
  std::vector<float> inv_freq_;  // [rot/2]
};

}  // namespace hypic::kernels
