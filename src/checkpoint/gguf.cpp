#include "checkpoint/gguf.h"

#include <algorithm>
#include <cstring>

#include "core/hash.h"

namespace hypic {

using nlohmann::json;

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF"
// Limits on what a header may declare before anything is allocated for it.
constexpr uint64_t kMaxStringBytes = uint64_t(1) << 30;
constexpr uint64_t kMaxArray = uint64_t(1) << 24;    // a vocabulary is ~10^5 tokens
constexpr uint64_t kMaxTensors = uint64_t(1) << 20;  // a model has ~10^3
constexpr int kMaxDims = 4;  // GGML_MAX_DIMS

// ggml.c's type_traits (name, block elements, block bytes); a null name is a removed id.
constexpr GgmlTypeInfo kTypes[] = {
    {"F32", 1, 4, true},        {"F16", 1, 2, true},         {"Q4_0", 32, 18, true},
    {"Q4_1", 32, 20, false},    {nullptr, 0, 0, false},      {nullptr, 0, 0, false},
    {"Q5_0", 32, 22, true},     {"Q5_1", 32, 24, true},      {"Q8_0", 32, 34, true},
    {"Q8_1", 32, 36, false},    {"Q2_K", 256, 84, false},    {"Q3_K", 256, 110, false},
    {"Q4_K", 256, 144, true},   {"Q5_K", 256, 176, true},    {"Q6_K", 256, 210, true},
    {"Q8_K", 256, 292, false},  {"IQ2_XXS", 256, 66, false}, {"IQ2_XS", 256, 74, false},
    {"IQ3_XXS", 256, 98, false}, {"IQ1_S", 256, 50, false},  {"IQ4_NL", 32, 18, false},
    {"IQ3_S", 256, 110, false}, {"IQ2_S", 256, 82, false},   {"IQ4_XS", 256, 136, false},
    {"I8", 1, 1, false},        {"I16", 1, 2, false},        {"I32", 1, 4, false},
    {"I64", 1, 8, false},       {"F64", 1, 8, false},        {"IQ1_M", 256, 56, false},
    {"BF16", 1, 2, true},       {nullptr, 0, 0, false},      {nullptr, 0, 0, false},
    {nullptr, 0, 0, false},     {"TQ1_0", 256, 54, false},   {"TQ2_0", 256, 66, false},
    {nullptr, 0, 0, false},     {nullptr, 0, 0, false},      {nullptr, 0, 0, false},
    {"MXFP4", 32, 17, false},
};

// GGUF metadata value types.
enum ValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// Reads the header fields in order; every read is bounds-checked against the file.
class Cursor {
 public:
  Cursor(const uint8_t* p, uint64_t size, const std::string& path) : p_(p), size_(size), path_(path) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  template <typename T>
  Status get(T* v, const char* what) {
    if (left() < sizeof(T)) return truncated(what);
    std::memcpy(v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::ok();
  }
  Status str(std::string* s, const char* what) {
    uint64_t n = 0;
    HYPIC_RETURN_IF_ERROR(get(&n, what));
    if (n > kMaxStringBytes || n > left()) return truncated(what);
    s->assign(reinterpret_cast<const char*>(p_ + pos_), size_t(n));
    pos_ += n;
    return Status::ok();
  }
  Status truncated(const std::string& what) const {
    return corrupt("'" + path_ + "': the header ends (or declares a size past the end of the file) inside " + what +
                   " at byte " + std::to_string(pos_) + " of " + std::to_string(size_) +
                   ": the file is truncated or not a GGUF file (download it again)");
  }
  Status bad(const std::string& what) const { return corrupt("'" + path_ + "': " + what); }

 private:
  const uint8_t* p_;
  uint64_t size_, pos_ = 0;
  const std::string& path_;
};

template <typename T>
Status scalar(Cursor& c, json* out, const char* what) {
  T v{};
  HYPIC_RETURN_IF_ERROR(c.get(&v, what));
  *out = v;
  return Status::ok();
}

// One value of `type` (arrays: of scalars or strings; GGUF writers never nest them).
Status read_value(Cursor& c, uint32_t type, json* out, const std::string& key, bool in_array) {
  const std::string what = "the value of '" + key + "'";
  switch (type) {
    case kU8: return scalar<uint8_t>(c, out, what.c_str());
    case kI8: return scalar<int8_t>(c, out, what.c_str());
    case kU16: return scalar<uint16_t>(c, out, what.c_str());
    case kI16: return scalar<int16_t>(c, out, what.c_str());
    case kU32: return scalar<uint32_t>(c, out, what.c_str());
    case kI32: return scalar<int32_t>(c, out, what.c_str());
    case kU64: return scalar<uint64_t>(c, out, what.c_str());
    case kI64: return scalar<int64_t>(c, out, what.c_str());
    case kF32: return scalar<float>(c, out, what.c_str());
    case kF64: return scalar<double>(c, out, what.c_str());
    case kBool: {
      uint8_t b = 0;
      HYPIC_RETURN_IF_ERROR(c.get(&b, what.c_str()));
      if (b > 1) return c.bad("metadata '" + key + "' is a bool holding " + std::to_string(b));
      *out = b != 0;
      return Status::ok();
    }
    case kString: {
      std::string s;
      HYPIC_RETURN_IF_ERROR(c.str(&s, what.c_str()));
      *out = std::move(s);
      return Status::ok();
    }
    case kArray: {
      if (in_array) return c.bad("metadata '" + key + "' is an array of arrays, which hypic does not read");
      uint32_t et = 0;
      uint64_t n = 0;
      HYPIC_RETURN_IF_ERROR(c.get(&et, what.c_str()));
      HYPIC_RETURN_IF_ERROR(c.get(&n, what.c_str()));
      // Every element takes at least one byte: a count past the end is a damaged header.
      if (n > c.left()) return c.truncated(what);
      if (n > kMaxArray)
        return c.bad("metadata '" + key + "' is an array of " + std::to_string(n) + " elements; hypic reads at most " +
                     std::to_string(kMaxArray));
      *out = json::array();
      for (uint64_t i = 0; i < n; ++i) {
        json v;
        HYPIC_RETURN_IF_ERROR(read_value(c, et, &v, key, /*in_array=*/true));
        out->push_back(std::move(v));
      }
      return Status::ok();
    }
    default:
      return c.bad("metadata '" + key + "' has value type " + std::to_string(type) +
                   ", which GGUF does not define (a damaged file, or a newer GGUF version)");
  }
}

std::string shape_text(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace

std::string gguf_value_text(const json& v, size_t max) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > max ? s.substr(0, max) + "..." : s;
}

const GgmlTypeInfo* ggml_type_info(uint32_t type) {
  if (type >= std::size(kTypes) || !kTypes[type].name) return nullptr;
  return &kTypes[type];
}

int64_t GgufTensorInfo::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<GgufFile> GgufFile::open(const std::string& path) {
  HYPIC_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> map, MappedFile::map(path, "GGUF", ".gguf"));
  const uint64_t size = map->size();
  return parse(std::move(map), size, path);
}

Result<GgufFile> GgufFile::from_bytes(std::string bytes, const std::string& name) {
  const uint64_t size = bytes.size();
  return parse(MappedFile::copy(std::move(bytes)), size, name);
}

Result<GgufFile> GgufFile::parse(std::shared_ptr<MappedFile> map, uint64_t size, const std::string& path) {
  GgufFile f;
  f.map_ = map;
  f.path_ = path;
  f.file_size_ = size;
  Cursor c(map->bytes(), size, path);
  uint32_t magic = 0;
  HYPIC_RETURN_IF_ERROR(c.get(&magic, "the magic number"));
  if (magic != kMagic) return c.bad("not a GGUF file (it does not start with \"GGUF\")");
  HYPIC_RETURN_IF_ERROR(c.get(&f.version_, "the version"));
  if (f.version_ < 2 || f.version_ > 3)
    return unsupported("'" + path + "': GGUF version " + std::to_string(f.version_) +
                       " is not supported (hypic reads versions 2 and 3)");
  uint64_t n_tensors = 0, n_kv = 0;
  HYPIC_RETURN_IF_ERROR(c.get(&n_tensors, "the tensor count"));
  HYPIC_RETURN_IF_ERROR(c.get(&n_kv, "the metadata count"));
  // A key / value takes at least 13 bytes, a tensor entry at least 24: counts the file
  // cannot hold are refused before anything is allocated for them.
  if (n_kv > c.left() / 13 || n_tensors > c.left() / 24 || n_tensors > kMaxTensors)
    return c.bad("the header declares " + std::to_string(n_tensors) + " tensors and " + std::to_string(n_kv) +
                 " metadata entries, more than the file's " + std::to_string(size) + " bytes can hold");

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    HYPIC_RETURN_IF_ERROR(c.str(&key, "a metadata key"));
    uint32_t type = 0;
    HYPIC_RETURN_IF_ERROR(c.get(&type, ("the value type of '" + key + "'").c_str()));
    json v;
    HYPIC_RETURN_IF_ERROR(read_value(c, type, &v, key, false));
    if (!f.metadata_.emplace(key, std::move(v)).second) return c.bad("metadata key '" + key + "' appears twice");
  }
  if (auto it = f.metadata_.find("general.alignment"); it != f.metadata_.end()) {
    const json& a = it->second;
    if (!a.is_number_unsigned() || a.get<uint64_t>() == 0 || (a.get<uint64_t>() & (a.get<uint64_t>() - 1)) != 0 ||
        a.get<uint64_t>() > (uint64_t(1) << 20))
      return c.bad("general.alignment is " + gguf_value_text(a) + "; it must be a power of two");
    f.alignment_ = a.get<uint64_t>();
  }

  f.tensors_.reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    HYPIC_RETURN_IF_ERROR(c.str(&t.name, "a tensor name"));
    const std::string ctx = "tensor '" + t.name + "'";
    uint32_t n_dims = 0;
    HYPIC_RETURN_IF_ERROR(c.get(&n_dims, ctx.c_str()));
    if (n_dims == 0 || n_dims > kMaxDims)
      return c.bad(ctx + " has " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    int64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = 0;
      HYPIC_RETURN_IF_ERROR(c.get(&ne, ctx.c_str()));
      if (ne == 0 || ne > (uint64_t(1) << 40) || elements > (int64_t(1) << 50) / int64_t(ne))
        return c.bad(ctx + " has a dimension of " + std::to_string(ne) + " (sizes must be positive and the tensor "
                     "under 2^50 elements)");
      elements *= int64_t(ne);
      t.shape.insert(t.shape.begin(), int64_t(ne));  // innermost first in the file
    }
    HYPIC_RETURN_IF_ERROR(c.get(&t.type, ctx.c_str()));
    HYPIC_RETURN_IF_ERROR(c.get(&t.offset, ctx.c_str()));
    const GgmlTypeInfo* ti = ggml_type_info(t.type);
    if (!ti) return c.bad(ctx + " has ggml type " + std::to_string(t.type) + ", which ggml does not define");
    if (t.shape.back() % ti->block_elems != 0)
      return c.bad(ctx + " (" + ti->name + ", shape " + shape_text(t.shape) + ") has rows of " +
                   std::to_string(t.shape.back()) + " elements, not a whole number of " +
                   std::to_string(ti->block_elems) + "-element blocks");
    t.nbytes = uint64_t(elements / ti->block_elems) * uint64_t(ti->block_bytes);
    if (t.offset % f.alignment_ != 0)
      return c.bad(ctx + " starts at data offset " + std::to_string(t.offset) + ", not a multiple of the alignment " +
                   std::to_string(f.alignment_));
    if (!f.index_.emplace(t.name, f.tensors_.size()).second) return c.bad(ctx + " appears twice");
    f.tensors_.push_back(std::move(t));
  }
  f.data_offset_ = (c.pos() + f.alignment_ - 1) / f.alignment_ * f.alignment_;
  if (f.data_offset_ > size) {
    // A file of metadata alone (a vocabulary) may end without the padding.
    if (!f.tensors_.empty()) return c.truncated("the padding before the data section");
    f.data_offset_ = size;
  }
  const uint64_t data = size - f.data_offset_;
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& t : f.tensors_) {
    if (t.offset > data || t.nbytes > data - t.offset)
      return c.bad("tensor '" + t.name + "' (" + std::to_string(t.nbytes) + " bytes at data offset " +
                   std::to_string(t.offset) + ") ends past the end of the file (" + std::to_string(data) +
                   " bytes of data): the file is truncated (download it again)");
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i - 1]->offset + by_offset[i - 1]->nbytes > by_offset[i]->offset)
      return c.bad("tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name + "' overlap");
  return f;
}

const json* GgufFile::find_meta(std::string_view key) const {
  auto it = metadata_.find(std::string(key));
  return it == metadata_.end() ? nullptr : &it->second;
}

namespace {

Status wrong_type(const std::string& path, std::string_view key, const char* want, const json& v) {
  return corrupt("'" + path + "': metadata '" + std::string(key) + "' should be " + want + ", is " + gguf_value_text(v));
}

}  // namespace

Result<std::optional<int64_t>> GgufFile::meta_int(std::string_view key) const {
  const json* v = find_meta(key);
  if (!v) return std::optional<int64_t>();
  if (v->is_number_integer() && (!v->is_number_unsigned() || v->get<uint64_t>() <= uint64_t(INT64_MAX)))
    return std::optional<int64_t>(v->get<int64_t>());
  return wrong_type(path_, key, "an integer", *v);
}

Result<std::optional<double>> GgufFile::meta_float(std::string_view key) const {
  const json* v = find_meta(key);
  if (!v) return std::optional<double>();
  if (v->is_number()) return std::optional<double>(v->get<double>());
  return wrong_type(path_, key, "a number", *v);
}

Result<std::optional<bool>> GgufFile::meta_bool(std::string_view key) const {
  const json* v = find_meta(key);
  if (!v) return std::optional<bool>();
  if (v->is_boolean()) return std::optional<bool>(v->get<bool>());
  return wrong_type(path_, key, "true or false", *v);
}

Result<std::optional<std::string>> GgufFile::meta_string(std::string_view key) const {
  const json* v = find_meta(key);
  if (!v) return std::optional<std::string>();
  if (v->is_string()) return std::optional<std::string>(v->get<std::string>());
  return wrong_type(path_, key, "a string", *v);
}

const GgufTensorInfo* GgufFile::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::string GgufFile::fingerprint() const {
  Sha256 h;
  h.update(map_->bytes(), size_t(data_offset_));
  for (const GgufTensorInfo& t : tensors_) {
    const std::span<const uint8_t> b = bytes(t);
    const size_t k = std::min<size_t>(b.size(), 64 << 10);
    h.update(b.data(), k);
    if (b.size() > k) h.update(b.data() + b.size() - k, k);
  }
  return h.final_hex();
}

std::span<const uint8_t> GgufFile::bytes(const GgufTensorInfo& t) const {
  return {map_->bytes() + data_offset_ + t.offset, size_t(t.nbytes)};
}

}  // namespace hypic
