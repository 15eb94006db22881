// The safetensors header reader (src/checkpoint/safetensors.h) on arbitrary files.
//
// The input is a whole file image, read through SafetensorsFile::from_bytes (the validation
// SafetensorsFile::open runs on a mapped file). It must never crash, throw or abort; a
// rejection is kCorrupt or kUnsupported. An accepted file must keep what open() promises:
// entries in data-offset order, every byte range inside the data section and sized by its
// shape and dtype, non-empty ranges disjoint; and every tensor readable, as raw bytes and
// (for float dtypes) as a Tensor, without touching a byte outside the file (ASan).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "checkpoint/safetensors.h"
#include "core/log.h"
#include "fuzz_common.h"

namespace {

// Reads every byte (so ASan sees an out-of-range view).
uint32_t touch(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  uint32_t h = 0;
  for (size_t i = 0; i < n; ++i) h = h * 31 + b[i];
  return h;
}

}  // namespace

// The reader warns about (and copies) tensors at unaligned offsets: not per input.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  hypic::set_log_level(hypic::LogLevel::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hypic;
  Result<SafetensorsFile> r =
      SafetensorsFile::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!r.is_ok()) {
    const StatusCode c = r.status().code();
    FUZZ_CHECK(c == StatusCode::kCorrupt || c == StatusCode::kUnsupported, "%s",
               r.status().to_string().c_str());
    FUZZ_CHECK(!r.status().message().empty());
    return 0;
  }
  const SafetensorsFile& f = *r;
  FUZZ_CHECK(f.file_size() == size);
  FUZZ_CHECK(f.data_offset() >= 8 && f.data_offset() <= size);
  FUZZ_CHECK(f.data_size() == size - f.data_offset());

  const std::vector<SafetensorsEntry>& es = f.entries();
  FUZZ_CHECK(f.names().size() == es.size());
  uint64_t reach = 0;  // end of the non-empty ranges so far
  volatile uint32_t sink = 0;
  for (size_t i = 0; i < es.size(); ++i) {
    const SafetensorsEntry& e = es[i];
    FUZZ_CHECK(e.begin <= e.end && e.end <= f.data_size());
    FUZZ_CHECK(i == 0 || es[i - 1].begin <= e.begin, "entries not in data-offset order");
    FUZZ_CHECK(e.element_size == safetensors_dtype_size(e.dtype) && e.element_size > 0);
    FUZZ_CHECK(e.float_dtype == safetensors_float_dtype(e.dtype));
    // numel × element size == byte size (overflow-checked: the reader rejects overflow).
    uint64_t n = e.element_size;
    bool overflow = false;
    for (int64_t d : e.shape) {
      FUZZ_CHECK(d >= 0);
      overflow |= __builtin_mul_overflow(n, uint64_t(d), &n);
    }
    FUZZ_CHECK(overflow ? n == 0 || e.nbytes() == 0 : n == e.nbytes(), "tensor '%s'",
               e.name.c_str());
    if (e.nbytes() > 0) {
      FUZZ_CHECK(e.begin >= reach, "tensor '%s' overlaps", e.name.c_str());
      reach = e.end;
    }
    const SafetensorsEntry* found = f.find(e.name);
    FUZZ_CHECK(found != nullptr && found->name == e.name);

    Result<RawTensor> raw = f.raw(e.name);
    FUZZ_CHECK(raw.is_ok(), "%s", raw.status().to_string().c_str());
    FUZZ_CHECK(raw->bytes.size() == e.nbytes() && raw->dtype == e.dtype && raw->shape == e.shape);
    sink = sink + touch(raw->bytes.data(), raw->bytes.size());

    Result<Tensor> t = f.tensor(e.name);
    if (!e.float_dtype) {
      FUZZ_CHECK(!t.is_ok() && t.status().code() == StatusCode::kUnsupported);
      continue;
    }
    FUZZ_CHECK(t.is_ok(), "%s", t.status().to_string().c_str());
    FUZZ_CHECK(t->dtype() == *e.float_dtype && t->shape() == e.shape);
    FUZZ_CHECK(t->nbytes() == e.nbytes());
    FUZZ_CHECK(std::memcmp(t->raw(), raw->bytes.data(), e.nbytes()) == 0);
  }
  (void)sink;
  FUZZ_CHECK(f.find("__metadata__") == nullptr);
  return 0;
}
