// Segment keys and the entry file format (disk tier).
//
// File: safetensors (checkpoint/safetensors.h). Tensors, in this order, for each decoder layer i:
//   layer.<i>.T (when the layer has a transition of a non-identity form), then
//   layer.<i>.<name> for each of the layer's tensors in its order.
// Metadata (strings): format = "hypic.segment", format_version = "2", key, length, seam,
//   tokens (base64 of the little-endian int32 ids), layers (JSON array, one
//   {"mixer", "tensors": [names], optional "transition": {"form","nv","dk"}} per layer),
//   checksum = "xxh64:<16 hex>".
// The checksum is XXH64 over every other metadata pair (in key order) followed by each
// tensor's name, dtype, shape and bytes in the order above, so every byte load_entry
// interprets is covered, not only the tensor data.
// serialize_entry / deserialize_entry hold the same bytes in memory (the wire form between
// instances); encode() and decode() are shared by both forms.
#include "entry/segment_entry.h"

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

#include "checkpoint/safetensors.h"
#include "core/base64.h"
#include "core/hash.h"
#include "core/json_bounded.h"
#include "entry/entry_container.h"

namespace hypic {
namespace {

using json = nlohmann::json;
using kernels::Transition;
using kernels::TransitionForm;

constexpr const char* kFormat = "hypic.segment";
constexpr const char* kFormatVersion = "2";

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

// One tensor slot in the file order. `t` is null for T (held in a Transition).
struct Slot {
  std::string name;
  Tensor* t = nullptr;
  Transition* T = nullptr;
};

std::vector<Slot> slots_of(SegmentEntry& e) {
  std::vector<Slot> s;
  for (size_t i = 0; i < e.layers.size(); ++i) {
    SegmentEntry::Layer& l = e.layers[i];
    const std::string p = "layer." + std::to_string(i) + ".";
    if (l.T) s.push_back({p + "T", nullptr, &*l.T});
    for (NamedTensor& n : l.tensors) s.push_back({p + n.name, &n.t, nullptr});
  }
  return s;
}

// A mixer id or tensor name: [a-z0-9_]{1,64} (so "T", the transition's name, is never one).
bool valid_name(std::string_view n) {
  return !n.empty() && n.size() <= 64 && std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// The layer's mixer id and tensor names: valid, names unique.
Status check_names(const SegmentEntry::Layer& l) {
  if (!valid_name(l.mixer))
    return invalid_argument("mixer id '" + l.mixer.substr(0, 80) + "' is not [a-z0-9_]{1,64}");
  std::set<std::string_view> names;
  for (const NamedTensor& n : l.tensors) {
    if (!valid_name(n.name))
      return invalid_argument("tensor name '" + n.name.substr(0, 80) + "' is not [a-z0-9_]{1,64}");
    if (!names.insert(n.name).second)
      return invalid_argument("tensor '" + n.name + "' appears twice");
  }
  return Status::ok();
}

// What holds for every entry whatever its mixers (each mixer checks its own shapes when the
// entry meets a model: TokenMixer::check_entry).
Status check_structure(const SegmentEntry& e) {
  if (e.length < 0 || e.seam < 0 || e.seam > e.length)
    return invalid_argument("length " + std::to_string(e.length) + " and seam " +
                            std::to_string(e.seam) + " must satisfy 0 <= seam <= length");
  if (int64_t(e.tokens.size()) != e.length)
    return invalid_argument(std::to_string(e.tokens.size()) + " token ids for length " +
                            std::to_string(e.length));
  for (size_t i = 0; i < e.layers.size(); ++i) {
    const SegmentEntry::Layer& l = e.layers[i];
    const std::string w = "layer " + std::to_string(i) + ": ";
    HYPIC_RETURN_IF_ERROR(check_names(l).with_context("layer " + std::to_string(i)));
    if (l.T) {
      const Transition& T = *l.T;
      if (T.nv < 0 || T.dk < 0 || T.nv > kMaxDim || T.dk > kMaxDim)
        return invalid_argument(w + "transition sizes nv=" + std::to_string(T.nv) + ", dk=" +
                                std::to_string(T.dk) + " out of range");
      const size_t want = T.form == TransitionForm::kIdentity
                              ? 0 : size_t(shape_numel(transition_shape(T)));
      if (T.data.size() != want)
        return invalid_argument(w + std::string(kernels::transition_form_name(T.form)) +
                                " transition with nv=" + std::to_string(T.nv) + ", dk=" +
                                std::to_string(T.dk) + " needs " + std::to_string(want) +
                                " values, has " + std::to_string(T.data.size()));
    }
    for (const NamedTensor& n : l.tensors)
      if (n.t.empty()) return invalid_argument(w + "tensor '" + n.name + "' is empty");
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
  static const std::set<std::string> k = {"format", "format_version", "key",     "length",
                                          "seam",   "tokens",         "layers", "checksum"};
  return k;
}

}  // namespace

const Tensor* SegmentEntry::Layer::find(std::string_view name) const {
  for (const NamedTensor& n : tensors)
    if (n.name == name) return &n.t;
  return nullptr;
}

void SegmentEntry::Layer::put(std::string name, Tensor t) {
  for (NamedTensor& n : tensors)
    if (n.name == name) {
      n.t = std::move(t);
      return;
    }
  tensors.push_back({std::move(name), std::move(t)});
}

size_t SegmentEntry::Layer::bytes() const {
  size_t n = T ? T->bytes() : 0;
  for (const NamedTensor& x : tensors) n += tensor_bytes(x.t);
  return n;
}

size_t SegmentEntry::bytes() const {
  size_t n = 0;
  for (const Layer& l : layers) n += l.bytes();
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
  for (const SegmentEntry::Layer& l : e.layers) {
    json names = json::array();
    for (const NamedTensor& n : l.tensors) names.push_back(n.name);
    json d = {{"mixer", l.mixer}, {"tensors", std::move(names)}};
    if (l.T)
      d["transition"] = {
          {"form", kernels::transition_form_name(l.T->form)}, {"nv", l.T->nv}, {"dk", l.T->dk}};
    layers.push_back(std::move(d));
  }
  meta["layers"] = layers.dump();

  Xxh64 h = checksum_start(meta);
  // slots_of needs a mutable entry only to hand out pointers; nothing is modified.
  for (const Slot& s : slots_of(const_cast<SegmentEntry&>(e))) {
    Tensor t;
    if (s.T) {
      if (s.T->form == TransitionForm::kIdentity) continue;
      t = Tensor::view(DType::kF32, transition_shape(*s.T), const_cast<float*>(s.T->data.data()),
                       nullptr);
    } else {
      t = *s.t;
    }
    checksum_tensor_header(h, s.name, safetensors_dtype_name(t.dtype()), t.shape(), t.nbytes());
    h.update(t.raw(), t.nbytes());
    out.tensors.emplace_back(s.name, std::move(t));
  }
  meta["checksum"] = checksum_string(h.digest());
  return out;
}

// One element of the "layers" metadata: {"mixer", "tensors", optional "transition"}; the
// tensors get their names (data follows). Names and sizes are checked by check_structure.
Status parse_layer(const json& l, size_t n_file_tensors, SegmentEntry::Layer* out) {
  const auto bad = [] { return invalid_argument("is not {mixer, tensors[, transition]}"); };
  if (!l.is_object() || !l.contains("mixer") || !l["mixer"].is_string() ||
      !l.contains("tensors") || !l["tensors"].is_array() ||
      l.size() != 2 + size_t(l.contains("transition")))
    return bad();
  out->mixer = l["mixer"].get<std::string>();
  if (l["tensors"].size() > n_file_tensors) return invalid_argument("lists more tensors than the file holds");
  for (const json& n : l["tensors"]) {
    if (!n.is_string()) return bad();
    out->tensors.push_back({n.get<std::string>(), Tensor()});
  }
  HYPIC_RETURN_IF_ERROR(check_names(*out));
  if (!l.contains("transition")) return Status::ok();
  const json& t = l["transition"];
  Transition T;
  if (!t.is_object() || t.size() != 3 || !t.contains("form") || !t["form"].is_string() ||
      !form_from_name(t["form"].get<std::string>(), &T.form) || !t.contains("nv") ||
      !t["nv"].is_number_integer() || !t.contains("dk") || !t["dk"].is_number_integer())
    return invalid_argument("transition is not {form, nv, dk}");
  const int64_t nv = t["nv"].get<int64_t>(), dk = t["dk"].get<int64_t>();
  if (nv < 0 || dk < 0 || nv > kMaxDim || dk > kMaxDim)
    return invalid_argument("transition sizes out of range");
  T.nv = int(nv);
  T.dk = int(dk);
  out->T = std::move(T);
  return Status::ok();
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
  int64_t seam = 0;
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
  json layers;
  try {
    layers = json::parse(meta.at("layers"));
  } catch (const json::exception&) {
    return bad("layer list is not valid JSON");
  }
  if (!layers.is_array() || layers.size() > f.tensors.size() + 4096)
    return bad("layer list is not a JSON array of plausible size");
  e.layers.resize(layers.size());
  for (size_t i = 0; i < layers.size(); ++i)
    if (Status st = parse_layer(layers[i], f.tensors.size(), &e.layers[i]); !st.is_ok())
      return bad("layer " + std::to_string(i) + " description " + json_dump_bounded(layers[i]) +
                 ": " + st.message());

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
    if (!fe) return bad("tensor '" + s.name + "' is missing");
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
  // The layout write_safetensors_raw produces (checkpoint/safetensors.h): largest element size
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
