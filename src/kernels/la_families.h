// Constructors of the per-family implementations (one source file each: la_<family>.cpp).
// Internal to the kernels layer; users call make_linear_attention().
#pragma once

#include <memory>

#include "kernels/linear_attn.h"

namespace hypic::kernels {

std::unique_ptr<LinearAttention> make_la_linear(const LaDims& d);
std::unique_ptr<LinearAttention> make_la_retnet(const LaDims& d);
std::unique_ptr<LinearAttention> make_la_lightning(const LaDims& d);
std::unique_ptr<LinearAttention> make_la_mamba2(const LaDims& d);
std::unique_ptr<LinearAttention> make_la_gla(const LaDims& d);
std::unique_ptr<LinearAttention> make_la_deltanet(const LaDims& d);
std::unique_ptr<LinearAttention> make_la_gated_deltanet(const LaDims& d);
std::unique_ptr<LinearAttention> make_la_kda(const LaDims& d);

}  // namespace hypic::kernels
