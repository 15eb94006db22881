// GGUF files (llama.cpp's single-file format, version 2 and 3): the header, the metadata
// key / value pairs and the tensor index, validated with bounds checks (a file is untrusted
// input), the file memory-mapped and every tensor's blocks read in place. Layout (all
// little-endian): "GGUF", u32 version, u64 tensor count, u64 metadata count; the metadata
// (string key, u32 value type, value; strings are a u64 length and bytes; arrays a u32 element
// type, a u64 count and the elements); per tensor its name, u32 dimension count, u64 sizes
// innermost first, u32 ggml type, u64 offset into the data section; then, at the next
// multiple of general.alignment (32 unless set), the data section.
//
// A tensor's shape here is hypic's, outermost first (GGUF's sizes reversed): a matrix
// [rows, cols], each row of cols elements stored as cols / block_size blocks.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/mapped_file.h"
#include "core/status.h"
#include "core/tensor.h"

namespace hypic {

// ggml's tensor types by their ids in the file (ggml.h `enum ggml_type`).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kBF16 = 30,
};

// What hypic knows of a ggml type id: its name, its block (elements, bytes) and whether hypic
// reads it. Every id ggml defines up to its type count is named (so a refusal can say
// "IQ2_XXS"); unknown ids give nullptr.
struct GgmlTypeInfo {
  const char* name;
  int64_t block_elems;
  int64_t block_bytes;
  bool supported;  // F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K
};
const GgmlTypeInfo* ggml_type_info(uint32_t type);

struct GgufTensorInfo {
  std::string name;
  Shape shape;  // outermost first
  uint32_t type = 0;
  uint64_t offset = 0;  // within the data section
  uint64_t nbytes = 0;
  int64_t elements() const;
};

// An open, validated GGUF file. Copies share the mapping; all methods are const and safe to
// call from several threads at once.
class GgufFile {
 public:
  // Maps and validates the whole header: magic, version, counts against the file size, every
  // key and value (types, lengths, nesting), the alignment, every tensor's name (unique),
  // dimensions, type (known to ggml; a row a whole number of blocks), byte range (inside the
  // data section, aligned, not overlapping another). Errors name the file and, where one is
  // at fault, the key or tensor. Types hypic does not read are accepted here (the loader
  // refuses them naming the tensor).
  static Result<GgufFile> open(const std::string& path);
  // The same validation of an image held in memory (the fuzz target, tests).
  static Result<GgufFile> from_bytes(std::string bytes, const std::string& name);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return file_size_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t alignment() const { return alignment_; }

  // Metadata as JSON values: integers, floats, booleans, strings, arrays of them.
  const std::map<std::string, nlohmann::json>& metadata() const { return metadata_; }
  const nlohmann::json* find_meta(std::string_view key) const;  // nullptr if absent
  // Typed reads: absent -> nullopt; present with another type -> an error naming the key.
  Result<std::optional<int64_t>> meta_int(std::string_view key) const;
  Result<std::optional<double>> meta_float(std::string_view key) const;
  Result<std::optional<bool>> meta_bool(std::string_view key) const;
  Result<std::optional<std::string>> meta_string(std::string_view key) const;

  // In file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find(std::string_view name) const;  // nullptr if absent
  // A tensor's stored bytes (blocks as in the file) and a handle keeping them mapped.
  std::span<const uint8_t> bytes(const GgufTensorInfo& t) const;
  std::shared_ptr<const void> owner() const { return map_; }
  // MappedFile::release_pages on this file's mapping.
  bool release_pages(const void* p, size_t n) const { return map_->release_pages(p, n); }

  // Identity of the weights for segment keys, without hashing gigabytes at every start (as
  // the safetensors loader's checkpoint fingerprint): SHA-256 over the header as stored
  // (metadata and tensor index: names, types, shapes, offsets) and the first and last 64 KiB
  // of every tensor. Files that differ only in a tensor's interior collide; re-quantised or
  // retrained weights change the sampled bytes. 64 hex digits.
  std::string fingerprint() const;

 private:
  static Result<GgufFile> parse(std::shared_ptr<MappedFile> map, uint64_t size, const std::string& path);
  std::shared_ptr<MappedFile> map_;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t file_size_ = 0, data_offset_ = 0, alignment_ = 32;
  std::map<std::string, nlohmann::json> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
};

// A metadata value as JSON text for messages, bytes that are not UTF-8 shown as U+FFFD (a
// GGUF string may hold any bytes), cut to `max` characters.
std::string gguf_value_text(const nlohmann::json& v, size_t max = 80);

// Decodes `n` elements (a whole number of the type's blocks) stored as `type` into floats:
// ggml's reference dequantization for F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K. Other
// types: an error naming the type.
Status ggml_dequantize(uint32_t type, const uint8_t* src, float* dst, int64_t n);

// The hypic type of a ggml type hypic reads (F32, F16, BF16, kGQ8_0 … kGQ5_1); nullopt otherwise.
std::optional<DType> ggml_dtype(uint32_t type);

}  // namespace hypic
