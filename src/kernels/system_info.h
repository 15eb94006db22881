// What this process runs on and with: hypic's version, the CPU and its features, the ISA tier
// in use (and the cap), the kernel per weight type for decode (gemv) and prefill (GEMM),
// oneDNN's ISA, the threads. One line for the first log line of a command (llama.cpp's
// system_info convention), and the same as JSON for every benchmark's output.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace hypic::kernels {

std::string system_info_line();
nlohmann::json system_info_json();

}  // namespace hypic::kernels
