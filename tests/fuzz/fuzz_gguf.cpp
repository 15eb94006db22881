// The GGUF reader (src/checkpoint/gguf.h) on arbitrary files.
//
// The input is a whole file image, read through GgufFile::from_bytes (the validation
// GgufFile::open runs on a mapped file). It must never crash, throw or abort; a rejection is
// kCorrupt or kUnsupported with a message. An accepted file must keep what open() promises:
// every tensor's bytes inside the data section, sized by its shape and type, aligned,
// disjoint; every typed metadata read answers a value or an error; and every tensor of a type
// hypic reads decodes without touching a byte outside its range (ASan).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/gguf.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hypic;
  Result<GgufFile> r = GgufFile::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!r.is_ok()) {
    const StatusCode c = r.status().code();
    FUZZ_CHECK(c == StatusCode::kCorrupt || c == StatusCode::kUnsupported, "%s", r.status().to_string().c_str());
    FUZZ_CHECK(!r.status().message().empty());
    return 0;
  }
  const GgufFile& f = *r;
  FUZZ_CHECK(f.file_size() == size);
  FUZZ_CHECK(f.data_offset() <= size && (f.tensors().empty() || f.data_offset() % f.alignment() == 0));
  for (const auto& [key, value] : f.metadata()) {
    (void)f.meta_int(key);
    (void)f.meta_float(key);
    (void)f.meta_bool(key);
    (void)f.meta_string(key);
    (void)gguf_value_text(value);
  }
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const GgufTensorInfo& t : f.tensors()) {
    const GgmlTypeInfo* ti = ggml_type_info(t.type);
    FUZZ_CHECK(ti != nullptr);
    FUZZ_CHECK(!t.shape.empty() && t.shape.size() <= 4);
    FUZZ_CHECK(t.elements() % ti->block_elems == 0);
    FUZZ_CHECK(t.nbytes == uint64_t(t.elements() / ti->block_elems) * uint64_t(ti->block_bytes));
    FUZZ_CHECK(t.offset % f.alignment() == 0 && t.offset + t.nbytes <= size - f.data_offset());
    FUZZ_CHECK(f.find(t.name) == &t);
    ranges.emplace_back(t.offset, t.nbytes);
    // Decode (bounded, so a large declared tensor does not make the run slow).
    if (ti->supported && t.elements() <= (int64_t(1) << 16)) {
      std::vector<float> out(size_t(t.elements()));
      FUZZ_CHECK(ggml_dequantize(t.type, f.bytes(t).data(), out.data(), t.elements()).is_ok());
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) FUZZ_CHECK(ranges[i - 1].first + ranges[i - 1].second <= ranges[i].first);
  return 0;
}
