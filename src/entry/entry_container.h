// The safetensors container of a segment entry, parsed but not yet interpreted
// (entry-internal; entry/segment_entry.cpp decodes the entry from it).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "checkpoint/safetensors.h"
#include "core/status.h"
#include "core/tensor.h"

namespace hypic {

// Bound on a dimension read from an entry file (nv, dk, seam; a shape dimension at most its
// square): what a damaged file can make us allocate stays bounded.
constexpr int64_t kMaxDim = int64_t(1) << 20;

// The tensors and metadata of a safetensors container (a mapped file or a byte string),
// header validated: dtypes known, byte sizes match shapes, ranges inside the data section
// and not overlapping. `data` points into memory the caller keeps alive.
struct EntryContainer {
  struct Item {
    std::string dtype;
    std::optional<DType> float_dtype;
    Shape shape;
    const uint8_t* data = nullptr;
    uint64_t nbytes = 0;
  };
  std::map<std::string, std::string> meta;
  std::map<std::string, Item> tensors;
  uint64_t data_size = 0;
};

// From a mapped file (SafetensorsFile has validated its header).
Result<EntryContainer> container_of_file(const SafetensorsFile& f);
// Parses the safetensors layout (checkpoint/safetensors.h) from memory. Stricter than the file
// reader where save_entry's output allows it: metadata values must be strings. Damage is
// kCorrupt.
Result<EntryContainer> container_of_bytes(std::string_view b);

}  // namespace hypic
