// Segment keys and the entry file format (disk tier).
//
// File: safetensors (model/safetensors.h). Tensors, in this fixed order (absent ones skipped):
//   linear.<i>.T  (absent for the identity form), linear.<i>.s0, linear.<i>.conv_tail,
//   linear.<i>.warm_mixed, linear.<i>.warm_g, linear.<i>.warm_beta   for each linear layer i
//   attn.<j>.k, attn.<j>.v                                            for each attention layer j
// Metadata (strings): format = "hypic.segment", format_version = "1", key, length, seam,
//   tokens (base64 of the little-endian int32 ids), linear (JSON array, one
//   {"form","nv","dk"} per linear layer), n_attn, checksum = "xxh64:<16 hex>".
// The checksum is XXH64 over every other metadata pair (in key order) followed by each
// tensor's name, dtype, shape and bytes in the order above, so every byte load_entry
// interprets is covered, not only the tensor data.
// serialize_entry / deserialize_entry hold the same bytes in memory (the wire form between
// instances); encode() and decode() are shared by both forms.
#include "model/segment_entry.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>

#include "core/base64.h"
#include "core/json_bounded.h"
#include "core/hash.h"
#include "model/entry_container.h"
#include "model/safetensors.h"

namespace hypic {
namespace {

using json = nlohmann::json;
using kernels::Transition;
using kernels::TransitionForm;

constexpr const char* kFormat = "hypic.segment";
constexpr const char* kFormatVersion = "1";

size_t tensor_bytes(const Tensor& t) { return t.empty() ? 0 : t.nbytes(); }

void put_u64(Xxh64& h, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; ++i) b[i] = uint8_t(v >> (8 * i));
  h.update(b, 8);
}
void put_str(Xxh64& h, std::string_view s) {
  put_u64(h, s.size());
  h.update(s.data(), s.size());
}

std::string tokens_base64(const std::vector<int32_t>& tokens) {
  std::vector<uint8_t> b(tokens.size() * 4);
  for (size_t i = 0; i < tokens.size(); ++i)
    for (int k = 0; k < 4; ++k) b[4 * i + size_t(k)] = uint8_t(uint32_t(tokens[i]) >> (8 * k));
  return base64_encode(b.data(), b.size());
}

bool parse_i64(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end;
}

// ---- structure --------------------------------------------------------------------------

bool form_from_name(std::string_view n, TransitionForm* f) {
  for (TransitionForm c : {TransitionForm::kIdentity, TransitionForm::kLogScalar,
                           TransitionForm::kLogVector, TransitionForm::kDense})
    if (n == kernels::transition_form_name(c)) {
      *f = c;
      return true;
    }
  return false;
}

// Shape of the T tensor of a form; empty optional-like: identity has no tensor.
Shape transition_shape(const Transition& T) {
  switch (T.form) {
    case TransitionForm::kIdentity: return {};
    case TransitionForm::kLogScalar: return {T.nv};
    case TransitionForm::kLogVector: return {T.nv, T.dk};
    case TransitionForm::kDense: return {T.nv, T.dk, T.dk};
  }
  return {};
}

// One tensor slot in the fixed file order. `t` is null for T (held in a Transition).
struct Slot {
  std::string name;
  Tensor* t = nullptr;
  Transition* T = nullptr;
};

std::vector<Slot> slots_of(SegmentEntry& e) {
  std::vector<Slot> s;
  for (size_t i = 0; i < e.linear.size(); ++i) {
    SegmentEntry::Linear& l = e.linear[i];
    const std::string p = "linear." + std::to_string(i) + ".";
    s.push_back({p + "T", nullptr, &l.T});
    s.push_back({p + "s0", &l.s0, nullptr});
    s.push_back({p + "conv_tail", &l.conv_tail, nullptr});
    s.push_back({p + "warm_mixed", &l.warm_mixed, nullptr});
    s.push_back({p + "warm_g", &l.warm_g, nullptr});
    s.push_back({p + "warm_beta", &l.warm_beta, nullptr});
  }
  for (size_t j = 0; j < e.attn.size(); ++j) {
    const std::string p = "attn." + std::to_string(j) + ".";
    s.push_back({p + "k", &e.attn[j].k, nullptr});
    s.push_back({p + "v", &e.attn[j].v, nullptr});
  }
  return s;
}

// Shapes consistent with segment_entry.h. `what` names the layer in the message.
Status check_structure(const SegmentEntry& e) {
  if (e.length < 0 || e.seam < 0 || e.seam > e.length)
    return invalid_argument("length " + std::to_string(e.length) + " and seam " +
                            std::to_string(e.seam) + " must satisfy 0 <= seam <= length");
  if (int64_t(e.tokens.size()) != e.length)
    return invalid_argument(std::to_string(e.tokens.size()) + " token ids for length " +
                            std::to_string(e.length));
  for (size_t i = 0; i < e.linear.size(); ++i) {
    const SegmentEntry::Linear& l = e.linear[i];
    const std::string w = "linear layer " + std::to_string(i) + ": ";
    const Transition& T = l.T;
    if (T.nv < 0 || T.dk < 0 || T.nv > kMaxDim || T.dk > kMaxDim)
      return invalid_argument(w + "transition sizes nv=" + std::to_string(T.nv) + ", dk=" +
                              std::to_string(T.dk) + " out of range");
    const Shape ts = transition_shape(T);
    const size_t want = T.form == TransitionForm::kIdentity ? 0 : size_t(shape_numel(ts));
    if (T.data.size() != want)
      return invalid_argument(w + std::string(kernels::transition_form_name(T.form)) +
                              " transition with nv=" + std::to_string(T.nv) + ", dk=" +
                              std::to_string(T.dk) + " needs " + std::to_string(want) +
                              " values, has " + std::to_string(T.data.size()));
    if (!l.s0.empty() && (l.s0.ndim() != 3 || l.s0.dim(0) != T.nv || l.s0.dim(1) != T.dk))
      return invalid_argument(w + "s0 " + shape_str(l.s0.shape()) + " is not [nv=" +
                              std::to_string(T.nv) + ", dk=" + std::to_string(T.dk) + ", dv]");
    if (!l.conv_tail.empty() && l.conv_tail.ndim() != 2)
      return invalid_argument(w + "conv_tail " + shape_str(l.conv_tail.shape()) +
                              " is not [K-1, conv_dim]");
    const int warm = !l.warm_mixed.empty() + !l.warm_g.empty() + !l.warm_beta.empty();
    if (warm != 0 && warm != 3)
      return invalid_argument(w + "warm_mixed, warm_g and warm_beta must all be present or all "
                              "absent");
    if (warm == 3) {
      const Tensor &m = l.warm_mixed, &g = l.warm_g, &b = l.warm_beta;
      if (m.ndim() != 2 || g.ndim() != 2 || b.ndim() != 2 || g.dim(0) != m.dim(0) ||
          b.dim(0) != m.dim(0) || g.dim(1) != T.nv || b.dim(1) != T.nv ||
          (!l.conv_tail.empty() && m.dim(1) != l.conv_tail.dim(1)))
        return invalid_argument(w + "warm-up shapes " + shape_str(m.shape()) + ", " +
                                shape_str(g.shape()) + ", " + shape_str(b.shape()) +
                                " are not [P, conv_dim], [P, nv], [P, nv]");
    }
  }
  for (size_t j = 0; j < e.attn.size(); ++j) {
    const SegmentEntry::Attn& a = e.attn[j];
    const std::string w = "attention layer " + std::to_string(j) + ": ";
    if (a.k.empty() != a.v.empty())
      return invalid_argument(w + "k and v must both be present or both absent");
    for (const Tensor* t : {&a.k, &a.v})
      if (!t->empty() && (t->ndim() < 1 || t->dim(0) != e.body_tokens()))
        return invalid_argument(w + "k/v " + shape_str(t->shape()) + " do not start with the " +
                                std::to_string(e.body_tokens()) + " body tokens");
  }
  return Status::ok();
}

// XXH64 over the metadata (all pairs but "checksum", in key order); tensors follow.
Xxh64 checksum_start(const std::map<std::string, std::string>& meta) {
  Xxh64 h;
  put_str(h, kFormat);
  for (const auto& [k, v] : meta) {
    if (k == "checksum") continue;
    put_str(h, k);
    put_str(h, v);
  }
  return h;
}

void checksum_tensor_header(Xxh64& h, const std::string& name, const char* dtype,
                            const Shape& shape, size_t nbytes) {
  put_str(h, name);
  put_str(h, dtype);
  put_u64(h, shape.size());
  for (int64_t d : shape) put_u64(h, uint64_t(d));
  put_u64(h, nbytes);
}

// Copies n bytes and hashes the copy (so the bytes verified are the bytes kept), in pieces
// that stay in cache between the two passes.
void copy_and_hash(Xxh64& h, void* dst, const void* src, size_t n) {
  constexpr size_t kPiece = size_t(1) << 18;
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  for (size_t o = 0; o < n; o += kPiece) {
    const size_t k = std::min(kPiece, n - o);
    std::memcpy(d + o, s + o, k);
    h.update(d + o, k);
  }
}

// An uninitialised owned tensor (every byte is about to be overwritten: no memset pass).
// Transparent huge pages (madvise) were tried: sometimes 2x faster, often 2-4x slower
// (direct compaction stalls), so plain pages.
Tensor alloc_uninit(DType t, const Shape& shape) {
  const size_t n = size_t(shape_numel(shape)) * dtype_size(t);
  const size_t cap = std::max<size_t>((n + 63) / 64 * 64, 64);
  void* p = std::aligned_alloc(64, cap);
  HYPIC_CHECK(p != nullptr, "out of memory allocating " + std::to_string(cap) + " bytes");
  return Tensor::view(t, shape, p, std::shared_ptr<void>(p, [](void* q) { std::free(q); }));
}

std::string checksum_string(uint64_t v) { return std::string("xxh64:") + to_hex64(v); }

const std::set<std::string>& metadata_keys() {
  static const std::set<std::string> k = {"format", "format_version", "key",    "length", "seam",
                                          "tokens", "linear",         "n_attn", "checksum"};
  return k;
}

}  // namespace

size_t SegmentEntry::bytes() const {
  size_t n = 0;
  for (const Linear& l : linear)
    n += l.T.bytes() + tensor_bytes(l.s0) + tensor_bytes(l.conv_tail) +
         tensor_bytes(l.warm_mixed) + tensor_bytes(l.warm_g) + tensor_bytes(l.warm_beta);
  for (const Attn& a : attn) n += tensor_bytes(a.k) + tensor_bytes(a.v);
  return n;
}

namespace {

// An entry in its serialised form: metadata (checksum included) and the tensors to store,
// in the fixed order above. Tensors are views of the entry's memory.
struct Encoded {
  std::map<std::string, std::string> meta;
  std::vector<std::pair<std::string, Tensor>> tensors;
};

Result<Encoded> encode(const SegmentEntry& e) {
  HYPIC_RETURN_IF_ERROR(check_structure(e));
  Encoded out;
  std::map<std::string, std::string>& meta = out.meta;
  meta["format"] = kFormat;
  meta["format_version"] = kFormatVersion;
  meta["key"] = e.key;
  meta["length"] = std::to_string(e.length);
  meta["seam"] = std::to_string(e.seam);
  meta["tokens"] = tokens_base64(e.tokens);
  json layers = json::array();
  for (const SegmentEntry::Linear& l : e.linear)
    layers.push_back(
        {{"form", kernels::transition_form_name(l.T.form)}, {"nv", l.T.nv}, {"dk", l.T.dk}});
  meta["linear"] = layers.dump();
  meta["n_attn"] = std::to_string(e.attn.size());

  Xxh64 h = checksum_start(meta);
  // slots_of needs a mutable entry only to hand out pointers; nothing is modified.
  for (const Slot& s : slots_of(const_cast<SegmentEntry&>(e))) {
    Tensor t;
    if (s.T) {
      if (s.T->form == TransitionForm::kIdentity) continue;
      t = Tensor::view(DType::kF32, transition_shape(*s.T), const_cast<float*>(s.T->data.data()),
                       nullptr);
    } else {
      if (s.t->empty()) continue;
      t = *s.t;
    }
    checksum_tensor_header(h, s.name, safetensors_dtype_name(t.dtype()), t.shape(), t.nbytes());
    h.update(t.raw(), t.nbytes());
    out.tensors.emplace_back(s.name, std::move(t));
  }
  meta["checksum"] = checksum_string(h.digest());
  return out;
}

// The entry in a container: every field checked, the checksum verified over the bytes copied
// out. `where` names the source in messages.
Result<SegmentEntry> decode(const EntryContainer& f, const std::string& where) {
  auto bad = [&](const std::string& m) { return corrupt(where + ": " + m + "; recompute it"); };
  const std::map<std::string, std::string>& meta = f.meta;

  for (const auto& [k, v] : meta)
    if (!metadata_keys().count(k)) return bad("unexpected metadata field '" + k + "'");
  for (const std::string& k : metadata_keys())
    if (!meta.count(k)) return bad("metadata field '" + k + "' is missing");
  if (meta.at("format") != kFormat) return bad("format is '" + meta.at("format") + "'");
  if (meta.at("format_version") != kFormatVersion)
    return bad("format version '" + meta.at("format_version") + "' is not the supported " +
               kFormatVersion);

  SegmentEntry e;
  e.key = meta.at("key");
  int64_t seam = 0, n_attn = 0;
  if (!parse_i64(meta.at("length"), &e.length) || e.length < 0)
    return bad("length '" + meta.at("length") + "' is not a non-negative integer");
  if (!parse_i64(meta.at("seam"), &seam) || seam < 0 || seam > e.length || seam > kMaxDim)
    return bad("seam '" + meta.at("seam") + "' is not an integer in [0, length]");
  e.seam = int(seam);
  std::vector<uint8_t> tb;
  if (!base64_decode(meta.at("tokens"), &tb) || tb.size() != size_t(e.length) * 4)
    return bad("token ids are not base64 of " + std::to_string(e.length) + " int32 values");
  e.tokens.resize(size_t(e.length));
  for (size_t i = 0; i < e.tokens.size(); ++i) {
    uint32_t u = 0;
    for (int k = 0; k < 4; ++k) u |= uint32_t(tb[4 * i + size_t(k)]) << (8 * k);
    e.tokens[i] = int32_t(u);
  }
  if (!parse_i64(meta.at("n_attn"), &n_attn) || n_attn < 0 ||
      n_attn > int64_t(f.tensors.size()) + 4096)
    return bad("n_attn '" + meta.at("n_attn") + "' is not a plausible layer count");
  json layers;
  try {
    layers = json::parse(meta.at("linear"));
  } catch (const json::exception&) {
    return bad("linear layer list is not valid JSON");
  }
  if (!layers.is_array() || layers.size() > f.tensors.size() + 4096)
    return bad("linear layer list is not a JSON array of plausible size");
  e.linear.resize(layers.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    const json& l = layers[i];
    Transition& T = e.linear[i].T;
    if (!l.is_object() || l.size() != 3 || !l.contains("form") || !l["form"].is_string() ||
        !form_from_name(l["form"].get<std::string>(), &T.form) || !l.contains("nv") ||
        !l["nv"].is_number_integer() || !l.contains("dk") || !l["dk"].is_number_integer())
      return bad("linear layer " + std::to_string(i) + " description " + json_dump_bounded(l) +
                 " is not {form, nv, dk}");
    const int64_t nv = l["nv"].get<int64_t>(), dk = l["dk"].get<int64_t>();
    if (nv < 0 || dk < 0 || nv > kMaxDim || dk > kMaxDim)
      return bad("linear layer " + std::to_string(i) + " sizes out of range");
    T.nv = int(nv);
    T.dk = int(dk);
  }
  e.attn.resize(size_t(n_attn));

  Xxh64 h = checksum_start(meta);
  size_t used = 0;
  uint64_t covered = 0;
  for (const Slot& s : slots_of(e)) {
    auto it = f.tensors.find(s.name);
    const EntryContainer::Item* fe = it == f.tensors.end() ? nullptr : &it->second;
    if (s.T && s.T->form == TransitionForm::kIdentity) {
      if (fe) return bad("tensor '" + s.name + "' present for an identity transition");
      continue;
    }
    if (!fe) {
      if (s.T) return bad("tensor '" + s.name + "' is missing");
      continue;
    }
    ++used;
    covered += fe->nbytes;
    if (!fe->float_dtype) return bad("tensor '" + s.name + "' has dtype " + fe->dtype);
    checksum_tensor_header(h, s.name, safetensors_dtype_name(*fe->float_dtype), fe->shape,
                           fe->nbytes);
    if (s.T) {
      if (*fe->float_dtype != DType::kF32 || fe->shape != transition_shape(*s.T))
        return bad("tensor '" + s.name + "' is " + fe->dtype + " " + shape_str(fe->shape) +
                   ", expected F32 " + shape_str(transition_shape(*s.T)));
      s.T->data.resize(size_t(shape_numel(fe->shape)));
      copy_and_hash(h, s.T->data.data(), fe->data, fe->nbytes);
    } else {
      *s.t = alloc_uninit(*fe->float_dtype, fe->shape);
      copy_and_hash(h, s.t->raw(), fe->data, fe->nbytes);
    }
  }
  if (used != f.tensors.size()) {
    std::set<std::string> known;
    for (const Slot& s : slots_of(e)) known.insert(s.name);
    for (const auto& [name, fe] : f.tensors)
      if (!known.count(name)) return bad("unexpected tensor '" + name + "'");
    return bad("unexpected tensors");
  }
  // save_entry packs the tensors back to back: any other byte is not ours.
  if (covered != f.data_size)
    return bad("the data section holds " + std::to_string(f.data_size) +
               " bytes but the tensors cover " + std::to_string(covered));
  if (Status st = check_structure(e); !st.is_ok()) return bad(st.message());
  const std::string sum = checksum_string(h.digest());
  if (meta.at("checksum") != sum)
    return bad("checksum mismatch (it says " + meta.at("checksum") + ", contents hash to " +
               sum + "): the data is damaged");
  return e;
}

}  // namespace

Status save_entry(const std::string& path, const SegmentEntry& e) {
  Result<Encoded> enc = encode(e);
  if (!enc.is_ok()) return enc.status().with_context("saving segment entry to '" + path + "'");
  return write_safetensors(path, enc->tensors, enc->meta);
}

Result<SegmentEntry> load_entry(const std::string& path) {
  Result<SafetensorsFile> fr = SafetensorsFile::open(path);
  if (!fr.is_ok()) {
    const Status& s = fr.status();
    if (s.code() == StatusCode::kNotFound || s.code() == StatusCode::kIoError) return s;
    return corrupt(s.message());  // any malformed file, whatever the reader's code
  }
  const std::string where = "segment entry '" + path + "'";
  Result<EntryContainer> c = container_of_file(*fr);  // views into fr's mapping
  if (!c.is_ok()) return corrupt(where + ": " + c.status().message());
  return decode(*c, where);
}

Result<std::string> serialize_entry(const SegmentEntry& e) {
  Result<Encoded> enc = encode(e);
  if (!enc.is_ok()) return enc.status().with_context("serialising segment entry");
  // The layout write_safetensors_raw produces (model/safetensors.h): largest element size
  // first, header padded with spaces so the data section starts 8-byte aligned.
  std::vector<const std::pair<std::string, Tensor>*> order;
  for (const auto& t : enc->tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return dtype_size(a->second.dtype()) > dtype_size(b->second.dtype());
  });
  json header = json::object();
  uint64_t offset = 0;
  for (const auto* t : order) {
    const uint64_t n = t->second.nbytes();
    header[t->first] = {{"dtype", safetensors_dtype_name(t->second.dtype())},
                        {"shape", t->second.shape()},
                        {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  header["__metadata__"] = enc->meta;
  std::string hs = header.dump();
  hs.append((8 - (8 + hs.size()) % 8) % 8, ' ');
  std::string out;
  out.reserve(8 + hs.size() + offset);
  for (int i = 0; i < 8; ++i) out += char(uint8_t(uint64_t(hs.size()) >> (8 * i)));
  out += hs;
  for (const auto* t : order) out.append(static_cast<const char*>(t->second.raw()), t->second.nbytes());
  return out;
}

Result<SegmentEntry> deserialize_entry(std::string_view bytes) {
  const std::string where = "segment entry (" + std::to_string(bytes.size()) + " bytes)";
  Result<EntryContainer> c = container_of_bytes(bytes);
  if (!c.is_ok()) return corrupt(where + ": " + c.status().message() + "; recompute it");
  return decode(*c, where);
}

}  // namespace hypic
