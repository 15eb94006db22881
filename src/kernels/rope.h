// Rotary position embedding on the first `rot` dims of each head (partial RoPE; dims rot..hd
// pass through): NeoX layout (rotate_half: pairs j and j + rot/2) or interleaved (DeepSeek's
// MLA: pairs 2j and 2j + 1), pair j at frequency theta^(−2j/rot).
#pragma once

#include <cstdint>
#include <vector>

namespace hypic::kernels {

class Rope {
 public:
  // rot: rotary dims (even), theta: base.
  Rope(int rot, float theta, bool interleaved = false);
  int rot() const { return rot_; }
  // x: [L, nh, hd]; token i sits at position pos0 + i.
  void apply(float* x, int64_t L, int nh, int hd, int64_t pos0) const;
  // Same, explicit positions: pos: [L].
  void apply_at(float* x, int64_t L, int nh, int hd, const int64_t* pos) const;

 private:
  int rot_;
  bool interleaved_;
  std::vector<float> inv_freq_;  // [rot/2]
};

}  // namespace hypic::kernels
