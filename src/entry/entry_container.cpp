#include "entry/entry_container.h"

#include <nlohmann/json.hpp>
#include <vector>

#include "core/json_bounded.h"

namespace hypic {
namespace {

using json = nlohmann::json;

bool json_u64(const json& j, uint64_t* out) {
  if (j.is_number_unsigned()) return *out = j.get<uint64_t>(), true;
  if (j.is_number_integer() && j.get<int64_t>() >= 0) return *out = uint64_t(j.get<int64_t>()), true;
  return false;
}

}  // namespace


Result<EntryContainer> container_of_file(const SafetensorsFile& f) {
  EntryContainer c;
  c.meta = f.metadata();
  c.data_size = f.data_size();
  for (const SafetensorsEntry& fe : f.entries()) {
    Result<RawTensor> r = f.raw(fe.name);
    if (!r.is_ok()) return r.status();
    c.tensors[fe.name] = {fe.dtype, fe.float_dtype, fe.shape, r->bytes.data(), fe.nbytes()};
  }
  return c;
}

Result<EntryContainer> container_of_bytes(std::string_view b) {
  if (b.size() < 8) return corrupt(std::to_string(b.size()) + " bytes: truncated");
  uint64_t hl = 0;
  for (int i = 7; i >= 0; --i) hl = hl << 8 | uint8_t(b[size_t(i)]);
  if (hl > b.size() - 8)
    return corrupt("header length " + std::to_string(hl) + " exceeds the " +
                   std::to_string(b.size() - 8) + " bytes that follow: truncated");
  EntryContainer c;
  c.data_size = b.size() - 8 - hl;
  const auto* data = reinterpret_cast<const uint8_t*>(b.data()) + 8 + hl;
  std::string_view hs = b.substr(8, size_t(hl));
  while (!hs.empty() && hs.back() == ' ') hs.remove_suffix(1);
  const json header = json::parse(hs.begin(), hs.end(), nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return corrupt("header is not a JSON object");
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) return corrupt("'__metadata__' is not an object");
      for (const auto& [k, mv] : v.items()) {
        if (!mv.is_string()) return corrupt("metadata field '" + k + "' is not a string");
        c.meta[k] = mv.get<std::string>();
      }
      continue;
    }
    const std::string w = "tensor '" + name + "': ";
    if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() ||
        !v.contains("shape") || !v["shape"].is_array() || !v.contains("data_offsets") ||
        !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
      return corrupt(w + "entry is not {dtype, shape, data_offsets}");
    EntryContainer::Item it;
    it.dtype = v["dtype"].get<std::string>();
    const size_t es = safetensors_dtype_size(it.dtype);
    if (es == 0) return corrupt(w + "unknown dtype '" + it.dtype + "'");
    it.float_dtype = safetensors_float_dtype(it.dtype);
    unsigned __int128 want = es;
    for (const json& d : v["shape"]) {
      uint64_t u = 0;
      if (!json_u64(d, &u) || u > uint64_t(kMaxDim) * kMaxDim)
        return corrupt(w + "shape " + json_dump_bounded(v["shape"]) + " is not non-negative integers");
      it.shape.push_back(int64_t(u));
      // Rejected as soon as a prefix overflows, as the file reader does: saturating instead
      // would let a later 0 dimension hide it (and shape_numel overflow on the result).
      want *= u;
      if (want > std::numeric_limits<uint64_t>::max())
        return corrupt(w + "shape " + json_dump_bounded(v["shape"]) + " holds more than 2^64 bytes");
    }
    uint64_t b0 = 0, b1 = 0;
    if (!json_u64(v["data_offsets"][0], &b0) || !json_u64(v["data_offsets"][1], &b1) ||
        b0 > b1 || b1 > c.data_size)
      return corrupt(w + "data_offsets " + json_dump_bounded(v["data_offsets"]) +
                     " are not a range inside the " + std::to_string(c.data_size) +
                     "-byte data section");
    if (want != b1 - b0)
      return corrupt(w + "holds " + std::to_string(b1 - b0) + " bytes, not what shape " +
                     shape_str(it.shape) + " of " + it.dtype + " needs");
    it.data = data + b0;
    it.nbytes = b1 - b0;
    if (it.nbytes) ranges.emplace_back(b0, b1);
    c.tensors[name] = std::move(it);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) return corrupt("tensor byte ranges overlap");
  return c;
}

}  // namespace hypic
