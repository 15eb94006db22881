// The segment-entry wire form (src/entry/segment_entry.h): deserialize_entry on arbitrary
// bytes, and serialize_entry / deserialize_entry round trips.
//
// 1. The input as a serialised entry: deserialize_entry must never crash, throw or abort; a
//    rejection is kCorrupt. An accepted entry must serialise again, that serialisation must
//    decode to an equal entry, and serialising that gives the same bytes (a fixed point).
// 2. The input as a recipe (FuzzedDataProvider) for an entry with small, mostly consistent,
//    sometimes deliberately inconsistent shapes: serialize_entry either rejects it
//    (kInvalidArgument) or its bytes decode to an equal entry.
//
// `fuzz_entry --write-seeds=DIR` writes the seed entries of corpus/fuzz_entry/ and exits.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/log.h"
#include "entry/segment_entry.h"
#include "fuzz_common.h"

namespace {

using hypic::DType;
using hypic::Result;
using hypic::SegmentEntry;
using hypic::Shape;
using hypic::StatusCode;
using hypic::Tensor;
using hypic::kernels::Transition;
using hypic::kernels::TransitionForm;

bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.empty() || b.empty()) return a.empty() == b.empty();
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Bitwise equality of everything an entry holds (NaN payloads included).
void check_same(const SegmentEntry& a, const SegmentEntry& b) {
  FUZZ_CHECK(a.key == b.key);
  FUZZ_CHECK(a.length == b.length && a.seam == b.seam);
  FUZZ_CHECK(a.tokens == b.tokens);
  FUZZ_CHECK(a.layers.size() == b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const SegmentEntry::Layer &x = a.layers[i], &y = b.layers[i];
    FUZZ_CHECK(x.mixer == y.mixer && bool(x.T) == bool(y.T), "layer %zu", i);
    if (x.T)
      FUZZ_CHECK(x.T->form == y.T->form && x.T->nv == y.T->nv && x.T->dk == y.T->dk &&
                     x.T->data.size() == y.T->data.size() &&
                     (x.T->data.empty() ||
                      std::memcmp(x.T->data.data(), y.T->data.data(), x.T->bytes()) == 0),
                 "layer %zu", i);
    FUZZ_CHECK(x.tensors.size() == y.tensors.size(), "layer %zu", i);
    for (size_t j = 0; j < x.tensors.size(); ++j)
      FUZZ_CHECK(x.tensors[j].name == y.tensors[j].name &&
                     same_tensor(x.tensors[j].t, y.tensors[j].t),
                 "layer %zu tensor %zu", i, j);
  }
  FUZZ_CHECK(a.bytes() == b.bytes());
}

// serialize -> deserialize -> equal -> serialize gives the same bytes.
void round_trip(const SegmentEntry& e) {
  Result<std::string> s1 = hypic::serialize_entry(e);
  FUZZ_CHECK(s1.is_ok(), "a decoded entry does not serialise: %s",
             s1.status().to_string().c_str());
  Result<SegmentEntry> d = hypic::deserialize_entry(*s1);
  FUZZ_CHECK(d.is_ok(), "serialised bytes do not decode: %s", d.status().to_string().c_str());
  check_same(e, *d);
  Result<std::string> s2 = hypic::serialize_entry(*d);
  FUZZ_CHECK(s2.is_ok() && *s2 == *s1, "serialisation is not a fixed point");
}

// ---- entries from a recipe --------------------------------------------------------------

DType pick_dtype(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: return DType::kF32;
    case 1: return DType::kBF16;
    default: return DType::kF16;
  }
}

// The consistent shape, or (when the recipe says so) any small shape.
Shape pick_shape(FuzzedDataProvider& in, const Shape& consistent) {
  if (!in.ConsumeBool()) return consistent;
  Shape s(in.ConsumeIntegralInRange<size_t>(0, 3));
  for (int64_t& d : s) d = in.ConsumeIntegralInRange<int64_t>(0, 4);
  return s;
}

Tensor filled(FuzzedDataProvider& in, DType t, Shape shape) {
  Tensor x = Tensor::zeros(t, std::move(shape));
  const std::vector<uint8_t> b = in.ConsumeBytes<uint8_t>(x.nbytes());
  if (!b.empty()) std::memcpy(x.raw(), b.data(), b.size());
  return x;
}

// A name from a small vocabulary (so duplicates happen), sometimes an invalid one.
std::string pick_name(FuzzedDataProvider& in) {
  static const char* const kNames[] = {"s0", "conv_tail", "warm_g", "k", "v", "Bad", ""};
  return kNames[in.ConsumeIntegralInRange<int>(0, 6)];
}

SegmentEntry entry_from_recipe(FuzzedDataProvider& in) {
  SegmentEntry e;
  static const char kHex[] = "0123456789abcdef";
  for (uint8_t b : in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 8))) {
    e.key += kHex[b >> 4];
    e.key += kHex[b & 15];
  }
  e.length = in.ConsumeIntegralInRange<int64_t>(0, 6);
  e.seam = in.ConsumeIntegralInRange<int>(0, int(e.length));
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) e.seam = in.ConsumeIntegralInRange<int>(-2, 9);
  size_t ntok = size_t(e.length);
  if (in.ConsumeIntegralInRange<int>(0, 15) == 0) ntok = in.ConsumeIntegralInRange<size_t>(0, 7);
  for (size_t i = 0; i < ntok; ++i) e.tokens.push_back(in.ConsumeIntegral<int32_t>());

  const int n_layers = in.ConsumeIntegralInRange<int>(0, 5);
  for (int i = 0; i < n_layers; ++i) {
    SegmentEntry::Layer l;
    l.mixer = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? pick_name(in) : "mixer_a";
    const int nv = in.ConsumeIntegralInRange<int>(0, 3), dk = in.ConsumeIntegralInRange<int>(0, 3);
    if (in.ConsumeBool()) {
      const TransitionForm forms[] = {TransitionForm::kIdentity, TransitionForm::kLogScalar,
                                      TransitionForm::kLogVector, TransitionForm::kDense};
      Transition& T = l.T.emplace(
          Transition::identity(forms[in.ConsumeIntegralInRange<int>(0, 3)], nv, dk));
      if (in.ConsumeIntegralInRange<int>(0, 15) == 0)
        T.data.resize(in.ConsumeIntegralInRange<size_t>(0, 20));
      for (float& v : T.data) {
        const uint32_t u = in.ConsumeIntegral<uint32_t>();
        std::memcpy(&v, &u, 4);
      }
    }
    const int n_tensors = in.ConsumeIntegralInRange<int>(0, 4);
    for (int j = 0; j < n_tensors; ++j) {
      std::string name = in.ConsumeIntegralInRange<int>(0, 7) == 0
                             ? pick_name(in) : "t" + std::to_string(j);
      if (in.ConsumeIntegralInRange<int>(0, 15) == 0) {  // empty: inconsistent
        l.tensors.push_back({std::move(name), Tensor()});
        continue;
      }
      const int64_t lb = std::max<int64_t>(e.body_tokens(), 0);
      const DType t = pick_dtype(in);
      l.tensors.push_back({std::move(name), filled(in, t, pick_shape(in, {lb, nv, dk}))});
    }
    e.layers.push_back(std::move(l));
  }
  return e;
}

// ---- seeds -------------------------------------------------------------------------------

// Small entries of the shapes the engine builds (every transition form, warm-up data, F32
// and BF16 attention), filled with a fixed pattern.
SegmentEntry seed_entry(int seam, bool warm) {
  uint32_t state = 12345u + uint32_t(seam);
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  auto bits = [&](DType t, Shape s) {
    Tensor x = Tensor::zeros(t, std::move(s));
    auto* p = static_cast<uint8_t*>(x.raw());
    for (size_t i = 0; i < x.nbytes(); ++i) p[i] = uint8_t(next() >> 24);
    return x;
  };
  const int nv = 2, dk = 2, dv = 2, conv_dim = 4, km1 = 2, nkv = 1, hd = 2;
  SegmentEntry e;
  e.length = 4;
  e.seam = seam;
  for (int i = 0; i < e.length; ++i) e.tokens.push_back(int32_t(next() % 151000));
  const TransitionForm forms[] = {TransitionForm::kIdentity, TransitionForm::kLogScalar,
                                  TransitionForm::kLogVector, TransitionForm::kDense};
  for (TransitionForm f : forms) {
    SegmentEntry::Layer l;
    l.mixer = "gated_deltanet";
    Transition& T = l.T.emplace(Transition::identity(f, nv, dk));
    for (float& v : T.data) v = -float(next() % 1000) / 256.0f;
    l.put("s0", bits(DType::kF32, {nv, dk, dv}));
    l.put("conv_tail", bits(DType::kF32, {km1, conv_dim}));
    if (warm) {
      l.put("warm_mixed", bits(DType::kF32, {1, conv_dim}));
      l.put("warm_g", bits(DType::kF32, {1, nv}));
      l.put("warm_beta", bits(DType::kF32, {1, nv}));
    }
    e.layers.push_back(std::move(l));
  }
  for (DType t : {DType::kF32, DType::kBF16}) {
    SegmentEntry::Layer a;
    a.mixer = "gated_attention";
    a.put("k", bits(t, {e.body_tokens(), nkv, hd}));
    a.put("v", bits(t, {e.body_tokens(), nkv, hd}));
    e.layers.push_back(std::move(a));
  }
  e.key = hypic::segment_key("fuzz-seed", DType::kF32, e.seam, "", e.tokens);
  return e;
}

// No tokens, and layers of zero heads (empty transitions, zero-sized tensors).
SegmentEntry zero_heads_entry() {
  SegmentEntry e;
  e.key = "0";
  for (TransitionForm f : {TransitionForm::kIdentity, TransitionForm::kLogScalar,
                           TransitionForm::kLogVector, TransitionForm::kDense}) {
    SegmentEntry::Layer l;
    l.mixer = "gated_deltanet";
    l.T = Transition::identity(f, 0, 0);
    l.put("s0", Tensor::zeros(DType::kF32, {0, 0, 3}));
    e.layers.push_back(std::move(l));
  }
  SegmentEntry::Layer a;
  a.mixer = "gated_attention";
  a.put("k", Tensor::zeros(DType::kBF16, {0, 1, 2}));
  a.put("v", Tensor::zeros(DType::kBF16, {0, 1, 2}));
  e.layers.push_back(std::move(a));
  e.layers.push_back({"gated_attention", std::nullopt, {}});  // a layer without tensors
  return e;
}

void write_seeds(const std::string& dir) {
  SegmentEntry empty;
  empty.key = "k";
  const std::pair<const char*, SegmentEntry> seeds[] = {
      {"entry_seam1_warm", seed_entry(1, true)},
      {"entry_seam2", seed_entry(2, false)},
      {"entry_zero_heads", zero_heads_entry()},
      {"entry_empty", empty},
  };
  for (const auto& [name, e] : seeds) {
    Result<std::string> b = hypic::serialize_entry(e);
    FUZZ_CHECK(b.is_ok(), "%s", b.status().to_string().c_str());
    FUZZ_CHECK(hypic::deserialize_entry(*b).is_ok());
    const std::string path = dir + "/" + name;
    std::ofstream(path, std::ios::binary) << *b;
    std::printf("wrote %s (%zu bytes)\n", path.c_str(), b->size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  hypic::set_log_level(hypic::LogLevel::kError);
  // libFuzzer ignores flags that start with "--".
  for (int i = 1; i < *argc; ++i) {
    const std::string_view a = (*argv)[i];
    if (a.substr(0, 14) == "--write-seeds=") {
      write_seeds(std::string(a.substr(14)));
      std::exit(0);
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // 1. The bytes as a serialised entry.
  Result<SegmentEntry> r =
      hypic::deserialize_entry(std::string_view(reinterpret_cast<const char*>(data), size));
  if (r.is_ok()) {
    round_trip(*r);
  } else {
    FUZZ_CHECK(r.status().code() == StatusCode::kCorrupt, "%s", r.status().to_string().c_str());
  }

  // 2. The bytes as a recipe.
  FuzzedDataProvider in(data, size);
  const SegmentEntry e = entry_from_recipe(in);
  Result<std::string> s = hypic::serialize_entry(e);
  if (!s.is_ok()) {
    FUZZ_CHECK(s.status().code() == StatusCode::kInvalidArgument, "%s",
               s.status().to_string().c_str());
    return 0;
  }
  Result<SegmentEntry> d = hypic::deserialize_entry(*s);
  FUZZ_CHECK(d.is_ok(), "a serialised entry does not decode: %s", d.status().to_string().c_str());
  check_same(e, *d);
  return 0;
}
