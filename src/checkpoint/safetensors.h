// Reader and writer for the safetensors format (https://github.com/huggingface/safetensors):
//   [u64 little-endian header length n][n bytes of JSON header][data section]
// header = {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}
// with offsets relative to the start of the data section.
//
// The reader memory-maps the file read-only; float tensors (F32, BF16, F16) come back as
// zero-copy Tensor views whose owner keeps the mapping alive. Views point into read-only
// memory: writing through them faults (clone() first). Every other dtype (I64, U8, BOOL,
// F8_E4M3, ...) is listed and readable as raw bytes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "checkpoint/mapped_file.h"
#include "core/status.h"
#include "core/tensor.h"

namespace hypic {

// Bytes per element of a safetensors dtype name ("F32", "BF16", "I64", "F8_E4M3", ...);
// 0 if the name is unknown. Sub-byte types (F4, F6_*) are not supported.
size_t safetensors_dtype_size(std::string_view dtype);
// The hypic DType of a float safetensors dtype name, or nullopt ("I64" etc.).
std::optional<DType> safetensors_float_dtype(std::string_view dtype);
// The safetensors spelling of a hypic DType ("F32", "BF16", "F16").
const char* safetensors_dtype_name(DType t);

// One header entry.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;                 // as spelled in the file
  std::optional<DType> float_dtype;  // set for F32 / BF16 / F16
  size_t element_size = 0;
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte range within the data section
  uint64_t nbytes() const { return end - begin; }
};

// A tensor of any dtype as raw little-endian bytes. `owner` (may be null) keeps `bytes`
// alive. Also the writer's input for dtypes that hypic::DType cannot express.
struct RawTensor {
  std::string dtype;  // safetensors spelling
  Shape shape;
  std::span<const uint8_t> bytes;
  std::shared_ptr<const void> owner;
};

// An open, validated safetensors file. Copies share the mapping; all methods are const and
// safe to call from several threads at once.
class SafetensorsFile {
 public:
  // Maps and validates the whole header: sizes, JSON, every entry's fields, dtype, shape,
  // byte size, bounds and overlap. Errors name the file and, where one is at fault, the
  // tensor.
  static Result<SafetensorsFile> open(const std::string& path);
  // The same validation of a safetensors image held in memory (the fuzz target, tests);
  // `bytes` is kept, views point into it. `name` stands for the path in messages and path().
  static Result<SafetensorsFile> from_bytes(std::string bytes, const std::string& name);

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  uint64_t data_offset() const { return data_offset_; }  // 8 + header length
  uint64_t data_size() const { return file_size_ - data_offset_; }

  // Entries in data-offset order.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const SafetensorsEntry* find(std::string_view name) const;  // nullptr if absent
  bool has(std::string_view name) const { return find(name) != nullptr; }
  std::vector<std::string> names() const;  // in data-offset order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // A float tensor as a zero-copy view (copied into an aligned buffer only if the file
  // places it at an offset that is not a multiple of its element size).
  Result<Tensor> tensor(std::string_view name) const;
  // Any tensor as raw bytes; `owner` keeps the mapping alive.
  Result<RawTensor> raw(std::string_view name) const;
  // If [p, p + n) lies in this file's memory mapping: drops the pages wholly inside it from
  // the process's resident set (madvise DONTNEED; a later read faults them in from the file
  // again) and returns true. Memory that is not this file's mapping is left alone.
  bool release_pages(const void* p, size_t n) const;

 private:
  // Validates the header of the `size` bytes held by `map` (size >= 8).
  static Result<SafetensorsFile> parse(std::shared_ptr<MappedFile> map, uint64_t size,
                                       const std::string& path);
  std::shared_ptr<MappedFile> map_;
  std::string path_;
  uint64_t file_size_ = 0, data_offset_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Writes a safetensors file atomically: a temporary file in the same directory, fsync,
// rename over `path`, fsync of the directory. Tensors are laid out contiguously, largest
// element size first, after a header padded with spaces to a multiple of 8 bytes, so every
// tensor's data offset is a multiple of its element size and the data section starts
// 8-byte aligned (gaps between tensors would make the file unreadable by the reference
// safetensors library, which requires the data section to be covered exactly).
Status write_safetensors(const std::string& path,
                         const std::vector<std::pair<std::string, Tensor>>& tensors,
                         const std::map<std::string, std::string>& metadata = {});
// Same for tensors of any safetensors dtype.
Status write_safetensors_raw(const std::string& path,
                             const std::vector<std::pair<std::string, RawTensor>>& tensors,
                             const std::map<std::string, std::string>& metadata = {});

}  // namespace hypic
