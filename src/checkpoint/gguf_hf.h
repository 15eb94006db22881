// A GGUF model file (llama.cpp's format; a split -00001-of-0000N.gguf with its other parts) seen
// as the Hugging Face checkpoint it was converted from: a config.json equivalent built from the
// `ARCH.*` metadata, and the tensors under their Hugging Face names, each transform of
// llama.cpp's converter (convert_hf_to_gguf.py, conversion/*.py) undone where it is read.
// The model loader then reads it as any checkpoint (model/loader.cpp). Mappings per
// architecture: gguf_qwen.cpp (qwen35, qwen35moe, qwen3next), gguf_kda_mla.cpp (kimi-linear,
// bailingmoe3), gguf_minimax.cpp (minimax-01); docs/GGUF_MAPPING.md says what the converter
// writes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/gguf.h"
#include "core/status.h"

namespace hypic {

struct GgufModel {
  std::vector<std::shared_ptr<const GgufFile>> parts;  // the split's files in order (or one)
  std::string architecture;                           // general.architecture
  nlohmann::json config;                              // as a Hugging Face config.json
  Checkpoint weights;                                 // Hugging Face tensor names
  std::string fingerprint;                            // of every part (GgufFile::fingerprint)
};

// Whether `path` names a GGUF file (a regular file ending in .gguf).
bool is_gguf_path(const std::string& path);

// Opens and validates every part, maps the architecture's metadata and tensors. Errors name
// the file and what is wrong: a missing split part, an architecture hypic does not run, missing
// metadata, a tensor absent, of an unexpected shape, or of a type hypic does not read (naming the
// tensor and the type).
Result<GgufModel> open_gguf_model(const std::string& path);

}  // namespace hypic
