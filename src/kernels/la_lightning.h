// Lightning attention (MiniMax-M1 / MiniMax-Text-01, Ring-linear-2.0): the fixed per-layer,
// per-head decays λ_h = e^{−s_{l,h}} the kernel reads from LaInputs::lightning_log_decay.
#pragma once

#include <vector>

namespace hypic::kernels {

// The ALiBi slope rule (Press et al., 2022; build_slope_tensor of the MiniMax and Ring ports):
// for H a power of two slope_h = 2^{−8(h+1)/H} (H = 64 → 2^{−(h+1)/8}); otherwise, with
// P = 2^⌊log2 H⌋, the P slopes of that rule followed by the first H − P odd-indexed slopes
// of the rule for 2P: 2^{−8(2i+1)/(2P)}, i < H − P.
std::vector<double> alibi_slopes(int num_heads);

// −s_{l,h} for h < num_heads (the log decay per token, ≤ 0), with
//     s_{l,h} = slope_h · (1 − l/(num_layers − 1) + 1e−5),   l = layer − layer_offset.
// layer is the model's layer index; layer_offset = 0 for MiniMax, 1 for the Ring-linear
// ports that count from layer_idx − 1 (ports differ: keep it a parameter). num_layers ≤ 1
// takes l/(num_layers − 1) as 0. (MiniMax's transformers code divides by
// num_layers − 1 + 1e−5: a relative difference in s below 1e−5/(num_layers − 1), under
// fp32 resolution for any real depth.)
std::vector<float> lightning_log_decay(int num_heads, int layer, int num_layers, int layer_offset);

// −s_{l,h} as transformers' MiniMax computes it (MiniMaxLightningAttention.get_slope_rate):
//     s_{l,h} = (2^{−8/H})^{h+1} · (1 − l/(N − 1 + 1e−5) + 1e−5),   H = num_heads, N = num_layers.
// For H a power of two the base equals the ALiBi slopes; otherwise it differs from
// alibi_slopes() (no interleaving of the 2P rule).
std::vector<float> minimax_log_decay(int num_heads, int layer, int num_layers);

}  // namespace hypic::kernels
