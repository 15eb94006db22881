#include "checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/json_bounded.h"
#include "core/log.h"

namespace hypic {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // as the reference implementation

struct DTypeInfo {
  const char* name;
  size_t size;
};
// Every dtype the reference implementation writes, except the sub-byte F4 / F6_* types.
constexpr DTypeInfo kDTypes[] = {
    {"BOOL", 1}, {"U8", 1},      {"I8", 1},      {"F8_E4M3", 1}, {"F8_E5M2", 1},
    {"F8_E8M0", 1}, {"I16", 2},  {"U16", 2},     {"F16", 2},     {"BF16", 2},
    {"I32", 4},  {"U32", 4},     {"F32", 4},     {"I64", 8},     {"U64", 8},
    {"F64", 8},  {"C64", 8},
};

std::string known_dtypes() {
  std::string s;
  for (const DTypeInfo& d : kDTypes) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

std::string errno_str(int e) { return std::strerror(e); }

// A failed write: kResourceExhausted when the disk is full (callers may free space and retry),
// else kIoError.
Status write_error(const std::string& what, int e) {
  const std::string m = what + ": " + errno_str(e);
  return e == ENOSPC || e == EDQUOT ? Status(StatusCode::kResourceExhausted, m) : io_error(m);
}

// numel × element size, or nullopt on overflow.
std::optional<uint64_t> checked_nbytes(const Shape& shape, size_t elem) {
  uint64_t n = elem;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (__builtin_mul_overflow(n, uint64_t(d), &n)) return std::nullopt;
  }
  return n;
}

// Reads a JSON integer into int64 / uint64 with range checks; false if it is not one.
bool json_int64(const json& j, int64_t* out) {
  if (j.is_number_unsigned()) {
    const uint64_t u = j.get<uint64_t>();
    if (u > uint64_t(std::numeric_limits<int64_t>::max())) return false;
    *out = int64_t(u);
    return true;
  }
  if (j.is_number_integer()) {
    *out = j.get<int64_t>();
    return true;
  }
  return false;
}

}  // namespace

size_t safetensors_dtype_size(std::string_view dtype) {
  for (const DTypeInfo& d : kDTypes)
    if (dtype == d.name) return d.size;
  return 0;
}

std::optional<DType> safetensors_float_dtype(std::string_view dtype) {
  if (dtype == "F32") return DType::kF32;
  if (dtype == "BF16") return DType::kBF16;
  if (dtype == "F16") return DType::kF16;
  return std::nullopt;
}

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    // Not safetensors types: hypic's names for its packed matrices (segment keys, the wire).
    case DType::kQ8: return "HYPIC_INT8";
    case DType::kQ4: return "HYPIC_Q4";
    case DType::kQ4T: break;  // the kernels' layout: never stored nor sent
    default: break;           // ggml's blocks (a GGUF file's): read, never written
  }
  return "?";
}

// ---------------------------------------------------------------------------------------
// Reader

namespace {

Status shorter_than_length_field(const std::string& path, uint64_t size) {
  return corrupt("'" + path + "' is " + std::to_string(size) +
                 " bytes, shorter than the 8-byte header length: the file is truncated or "
                 "not a safetensors file (download it again)");
}

}  // namespace

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  HYPIC_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> map, MappedFile::map(path, "safetensors", ".safetensors"));
  const uint64_t size = map->size();
  if (size < 8) return shorter_than_length_field(path, size);
  return parse(std::move(map), size, path);
}

Result<SafetensorsFile> SafetensorsFile::from_bytes(std::string bytes, const std::string& name) {
  const uint64_t size = bytes.size();
  if (size < 8) return shorter_than_length_field(name, size);
  return parse(MappedFile::copy(std::move(bytes)), size, name);
}

Result<SafetensorsFile> SafetensorsFile::parse(std::shared_ptr<MappedFile> map, uint64_t size,
                                               const std::string& path) {
  SafetensorsFile f;
  f.map_ = std::move(map);
  f.path_ = path;
  f.file_size_ = size;
  const uint8_t* base = f.map_->bytes();

  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base[i];
  if (header_len > kMaxHeaderBytes)
    return corrupt("'" + path + "': header length " + std::to_string(header_len) +
                   " is larger than 100 MB: not a safetensors file, or its first 8 bytes are "
                   "damaged");
  if (header_len > size - 8)
    return corrupt("'" + path + "': header length " + std::to_string(header_len) +
                   " exceeds the " + std::to_string(size - 8) +
                   " bytes that follow it: the file is truncated (download it again)");
  f.data_offset_ = 8 + header_len;
  const uint64_t data_size = size - f.data_offset_;

  // The reference writer pads the header with spaces; tolerate NUL padding as well.
  const char* hb = reinterpret_cast<const char*>(base + 8);
  size_t hn = header_len;
  while (hn > 0 && (hb[hn - 1] == '\0' || hb[hn - 1] == ' ')) --hn;

  json header;
  try {
    header = json::parse(hb, hb + hn);
  } catch (const json::exception& e) {
    return corrupt("'" + path + "': header is not valid JSON (" + e.what() +
                   "): the file is damaged or not a safetensors file");
  }
  if (!header.is_object())
    return corrupt("'" + path + "': header is JSON but not an object of tensor entries");

  const std::string where = "'" + path + "': ";
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object())
        return corrupt(where + "'__metadata__' must be an object of strings");
      for (const auto& [k, mv] : v.items()) {
        if (json_nested_deeper(mv, kMaxDumpDepth))
          return corrupt(where + "'__metadata__' value '" + k + "' is nested more than " +
                         std::to_string(kMaxDumpDepth) + " levels deep");
        f.metadata_[k] = mv.is_string() ? mv.get<std::string>() : mv.dump();
      }
      continue;
    }
    const std::string t = where + "tensor '" + name + "': ";
    if (!v.is_object()) return corrupt(t + "header entry is not an object");
    SafetensorsEntry e;
    e.name = name;

    auto dt = v.find("dtype");
    if (dt == v.end() || !dt->is_string())
      return corrupt(t + "missing or non-string field 'dtype'");
    e.dtype = dt->get<std::string>();
    e.element_size = safetensors_dtype_size(e.dtype);
    if (e.element_size == 0)
      return unsupported(t + "unknown dtype '" + e.dtype + "' (known: " + known_dtypes() + ")");
    e.float_dtype = safetensors_float_dtype(e.dtype);

    auto sh = v.find("shape");
    if (sh == v.end() || !sh->is_array())
      return corrupt(t + "missing or non-array field 'shape'");
    for (size_t i = 0; i < sh->size(); ++i) {
      const json& d = (*sh)[i];
      int64_t dim = 0;
      if (!json_int64(d, &dim))
        return corrupt(t + "shape entry " + std::to_string(i) + " (" + json_dump_bounded(d) +
                       ") is not an integer");
      if (dim < 0)
        return corrupt(t + "negative dimension " + std::to_string(dim) + " at index " +
                       std::to_string(i) + " of shape " + json_dump_bounded(*sh));
      e.shape.push_back(dim);
    }

    auto off = v.find("data_offsets");
    if (off == v.end() || !off->is_array() || off->size() != 2)
      return corrupt(t + "missing field 'data_offsets' or it is not a [begin, end] pair");
    int64_t b = 0, en = 0;
    if (!json_int64((*off)[0], &b) || !json_int64((*off)[1], &en) || b < 0 || en < 0)
      return corrupt(t + "data_offsets " + json_dump_bounded(*off) + " are not non-negative integers");
    e.begin = uint64_t(b);
    e.end = uint64_t(en);
    if (e.begin > e.end)
      return corrupt(t + "data_offsets " + json_dump_bounded(*off) + " are reversed (begin > end)");
    if (e.end > data_size)
      return corrupt(t + "data_offsets " + json_dump_bounded(*off) + " extend past the data section (" +
                     std::to_string(data_size) + " bytes): the file is truncated (download "
                     "it again)");
    const std::optional<uint64_t> want = checked_nbytes(e.shape, e.element_size);
    if (!want || *want != e.nbytes())
      return corrupt(t + "holds " + std::to_string(e.nbytes()) + " bytes but shape " +
                     shape_str(e.shape) + " of " + e.dtype + " needs " +
                     (want ? std::to_string(*want) : std::string("more than 2^64")));
    f.entries_.push_back(std::move(e));
  }

  std::sort(f.entries_.begin(), f.entries_.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  const SafetensorsEntry* prev = nullptr;  // the non-empty entry reaching furthest so far
  for (const SafetensorsEntry& e : f.entries_) {
    if (e.nbytes() == 0) continue;
    if (prev && e.begin < prev->end)
      return corrupt(where + "tensors '" + prev->name + "' [" + std::to_string(prev->begin) +
                     ", " + std::to_string(prev->end) + ") and '" + e.name + "' [" +
                     std::to_string(e.begin) + ", " + std::to_string(e.end) + ") overlap");
    prev = &e;
  }
  for (size_t i = 0; i < f.entries_.size(); ++i) f.index_.emplace(f.entries_[i].name, i);
  return f;
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> r;
  r.reserve(entries_.size());
  for (const SafetensorsEntry& e : entries_) r.push_back(e.name);
  return r;
}

Result<RawTensor> SafetensorsFile::raw(std::string_view name) const {
  const SafetensorsEntry* e = find(name);
  if (!e) return not_found("'" + path_ + "' has no tensor named '" + std::string(name) + "'");
  RawTensor r;
  r.dtype = e->dtype;
  r.shape = e->shape;
  r.bytes = {map_->bytes() + data_offset_ + e->begin, size_t(e->nbytes())};
  r.owner = map_;
  return r;
}

bool SafetensorsFile::release_pages(const void* p, size_t n) const { return map_->release_pages(p, n); }

Result<Tensor> SafetensorsFile::tensor(std::string_view name) const {
  const SafetensorsEntry* e = find(name);
  if (!e) return not_found("'" + path_ + "' has no tensor named '" + std::string(name) + "'");
  if (!e->float_dtype)
    return unsupported("tensor '" + e->name + "' in file '" + path_ + "' has dtype " +
                       e->dtype + ", which is not a float type hypic computes with (F32, "
                       "BF16, F16); read it as raw bytes instead");
  const uint8_t* p = map_->bytes() + data_offset_ + e->begin;
  if (reinterpret_cast<uintptr_t>(p) % e->element_size != 0) {
    HYPIC_LOG_WARN("safetensors: tensor '%s' in %s sits at an offset that is not a multiple "
                   "of its element size; copying it (%llu bytes)", e->name.c_str(),
                   path_.c_str(), (unsigned long long)e->nbytes());
    Tensor t = Tensor::zeros(*e->float_dtype, e->shape);
    std::memcpy(t.raw(), p, e->nbytes());
    return t;
  }
  return Tensor::view(*e->float_dtype, e->shape, const_cast<uint8_t*>(p), map_);
}

// ---------------------------------------------------------------------------------------
// Writer

namespace {

Status write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, std::min<size_t>(n, size_t(1) << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      return write_error("writing '" + path + "' failed", errno);
    }
    p += w;
    n -= size_t(w);
  }
  return Status::ok();
}

}  // namespace

Status write_safetensors_raw(const std::string& path,
                             const std::vector<std::pair<std::string, RawTensor>>& tensors,
                             const std::map<std::string, std::string>& metadata) {
  std::vector<size_t> order(tensors.size());
  {
    std::unordered_map<std::string, size_t> seen;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto& [name, t] = tensors[i];
      const std::string what = "writing '" + path + "': tensor '" + name + "': ";
      if (name.empty() || name == "__metadata__")
        return invalid_argument("writing '" + path + "': invalid tensor name '" + name + "'");
      if (!seen.emplace(name, i).second)
        return invalid_argument("writing '" + path + "': tensor name '" + name +
                                "' appears twice");
      const size_t es = safetensors_dtype_size(t.dtype);
      if (es == 0) return invalid_argument(what + "unknown dtype '" + t.dtype + "'");
      const std::optional<uint64_t> nb = checked_nbytes(t.shape, es);
      if (!nb) return invalid_argument(what + "invalid shape " + shape_str(t.shape));
      if (*nb != t.bytes.size())
        return invalid_argument(what + "has " + std::to_string(t.bytes.size()) +
                                " bytes, shape needs " + std::to_string(*nb));
      if (*nb > 0 && t.bytes.data() == nullptr)
        return invalid_argument(what + "has no data");
      order[i] = i;
    }
  }
  // Largest element first: each tensor's offset is then a multiple of its element size.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return safetensors_dtype_size(tensors[a].second.dtype) >
           safetensors_dtype_size(tensors[b].second.dtype);
  });

  json header = json::object();
  uint64_t offset = 0;
  for (size_t i : order) {
    const RawTensor& t = tensors[i].second;
    header[tensors[i].first] = {{"dtype", t.dtype},
                                {"shape", t.shape},
                                {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string hs = header.dump();
  hs.append((8 - (8 + hs.size()) % 8) % 8, ' ');
  uint8_t len_le[8];
  for (int i = 0; i < 8; ++i) len_le[i] = uint8_t(uint64_t(hs.size()) >> (8 * i));

  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmpl = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0)
    return write_error("cannot create a temporary file in '" + dir.string() + "' to write '" + path + "'", errno);
  auto fail = [&](Status s) {
    ::close(fd);
    ::unlink(tmpl.c_str());
    return s;
  };
  if (::fchmod(fd, 0644) != 0) return fail(io_error("chmod '" + tmpl + "': " + errno_str(errno)));
  Status s = write_all(fd, len_le, 8, tmpl);
  if (s.is_ok()) s = write_all(fd, hs.data(), hs.size(), tmpl);
  for (size_t i : order) {
    if (!s.is_ok()) break;
    const RawTensor& t = tensors[i].second;
    s = write_all(fd, t.bytes.data(), t.bytes.size(), tmpl);
  }
  if (!s.is_ok()) return fail(s);
  if (::fsync(fd) != 0) return fail(write_error("fsync '" + tmpl + "'", errno));
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmpl.c_str());
    return write_error("closing '" + tmpl + "'", e);
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmpl.c_str());
    return io_error("cannot rename '" + tmpl + "' to '" + path + "': " + errno_str(e));
  }
  // Make the rename itself durable.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

Status write_safetensors(const std::string& path,
                         const std::vector<std::pair<std::string, Tensor>>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::vector<std::pair<std::string, RawTensor>> raw;
  raw.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    if (t.empty() && t.numel() > 0)
      return invalid_argument("writing '" + path + "': tensor '" + name + "' has no storage");
    RawTensor r;
    r.dtype = safetensors_dtype_name(t.dtype());
    r.shape = t.shape();
    r.bytes = {static_cast<const uint8_t*>(t.raw()), t.nbytes()};
    raw.emplace_back(name, std::move(r));
  }
  return write_safetensors_raw(path, raw, metadata);
}

}  // namespace hypic
