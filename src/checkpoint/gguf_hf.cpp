#include "checkpoint/gguf_hf.h"

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <regex>

#include "checkpoint/gguf_hf_map.h"
#include "core/hash.h"

namespace hypic {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::optional<DType> float_dtype(uint32_t type) {
  switch (GgmlType(type)) {
    case GgmlType::kF32: return DType::kF32;
    case GgmlType::kF16: return DType::kF16;
    case GgmlType::kBF16: return DType::kBF16;
    default: return std::nullopt;
  }
}

// Rows [row0, row0 + rows) of the tensor's outermost dimension seen as `shape`: a view of the
// mapping, in its ggml type (core/ggml_quant.h) unless `f32`; dequantized F32 when `f32`.
Result<Tensor> read_rows(const GgufFile& f, const GgufTensorInfo& t, int64_t row0, int64_t rows,
                         const Shape& shape, bool f32) {
  const int64_t outer = t.shape.empty() ? 1 : t.shape[0];
  const uint64_t row_bytes = t.nbytes / uint64_t(outer);
  std::span<const uint8_t> b = f.bytes(t).subspan(size_t(row0) * row_bytes, size_t(rows) * row_bytes);
  const std::optional<DType> dt = ggml_dtype(t.type);
  if (dt && (float_dtype(t.type) || (!f32 && !shape.empty() && shape.back() == t.shape.back()))) {
    auto owner = std::const_pointer_cast<void>(f.owner());
    Tensor v = Tensor::view(*dt, shape, const_cast<uint8_t*>(b.data()), owner);
    return f32 && *dt != DType::kF32 ? v.to(DType::kF32) : v;
  }
  Tensor out = Tensor::zeros_f32(shape);
  HYPIC_RETURN_IF_ERROR(ggml_dequantize(t.type, b.data(), out.f32(), numel(shape)));
  return out;
}

std::string meta_type_error(const std::string& key, const std::string& path, const char* want) {
  return "metadata key '" + key + "' of '" + path + "' is not " + want;
}

// The other parts of a split named PREFIX-0000k-of-0000N.gguf, in order; {path} otherwise.
Result<std::vector<std::string>> split_parts(const std::string& path, const GgufFile& first) {
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> count, first.meta_int("split.count"));
  if (!count || *count <= 1) return std::vector<std::string>{path};
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> no, first.meta_int("split.no"));
  static const std::regex kSplit(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");
  std::smatch m;
  if (!std::regex_match(path, m, kSplit) || (no && *no != 0))
    return invalid_argument("'" + path + "' is part " + std::to_string(no.value_or(0) + 1) + " of a GGUF split into " +
                            std::to_string(*count) + " files; pass its first part (…-00001-of-" +
                            [&] { char b[8]; std::snprintf(b, sizeof b, "%05d", int(*count)); return std::string(b); }() +
                            ".gguf), with the others beside it");
  std::vector<std::string> parts;
  for (int64_t i = 1; i <= *count; ++i) {
    char b[32];
    std::snprintf(b, sizeof b, "-%05d-of-%05d.gguf", int(i), int(*count));
    parts.push_back(m[1].str() + b);
  }
  return parts;
}

struct ArchEntry {
  const char* name;
  GgufArchMapper map;
};
// Every hybrid architecture llama.cpp writes (Ring-linear / Ling-linear has none there).
constexpr ArchEntry kArchs[] = {
    {"qwen35", map_gguf_qwen},   {"qwen35moe", map_gguf_qwen}, {"qwen3next", map_gguf_qwen},
    {"kimi-linear", map_gguf_kimi}, {"minimax-01", map_gguf_minimax}, {"bailingmoe3", map_gguf_bailing3},
};

}  // namespace

void untile_head_rows(const float* src, float* dst, int64_t row0, int64_t n, int64_t nk, int64_t d,
                      int64_t width) {
  const int64_t r = n / nk, block = d * width;
  for (int64_t h = 0; h < n; ++h) {
    const int64_t g = h / r, j = h % r, t = j * nk + g;
    std::copy_n(src + (row0 * width + t * block), block, dst + (row0 * width + h * block));
  }
}

Status alias_stacked_experts(GgufHfMap& m, int64_t E, int64_t H, int64_t I, const std::string& b,
                             const std::string& p, const char* gate, const char* up, const char* down) {
  for (int64_t e = 0; e < E; ++e) {
    const std::string q = p + "experts." + std::to_string(e) + ".";
    HYPIC_RETURN_IF_ERROR(m.alias(q + gate, b + "ffn_gate_exps.weight", {I, H}, e, 1));
    HYPIC_RETURN_IF_ERROR(m.alias(q + up, b + "ffn_up_exps.weight", {I, H}, e, 1));
    HYPIC_RETURN_IF_ERROR(m.alias(q + down, b + "ffn_down_exps.weight", {H, I}, e, 1));
  }
  return Status::ok();
}

Status map_special_token_ids(const GgufHfMap& m, json& c) {
  for (const auto& [key, field] : {std::pair{"tokenizer.ggml.eos_token_id", "eos_token_id"},
                                   {"tokenizer.ggml.bos_token_id", "bos_token_id"},
                                   {"tokenizer.ggml.padding_token_id", "pad_token_id"}}) {
    HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> id, m.head().meta_int(key));
    if (id) c[field] = *id;
  }
  return Status::ok();
}

GgufHfMap::GgufHfMap(std::vector<std::shared_ptr<const GgufFile>> parts, std::string arch)
    : parts_(std::move(parts)), arch_(std::move(arch)) {
  for (size_t p = 0; p < parts_.size(); ++p)
    for (const GgufTensorInfo& t : parts_[p]->tensors()) index_.emplace(t.name, std::make_pair(p, &t));
}

Result<int64_t> GgufHfMap::need_int(std::string_view key) const {
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> v, opt_int(key));
  if (!v)
    return invalid_argument("'" + head().path() + "' (architecture " + arch_ + ") lacks the metadata key '" +
                            arch_ + "." + std::string(key) + "'; the file was not written by llama.cpp's "
                            "converter, or by one too old for hypic");
  return *v;
}

Result<double> GgufHfMap::need_float(std::string_view key) const {
  HYPIC_ASSIGN_OR_RETURN(std::optional<double> v, opt_float(key));
  if (!v)
    return invalid_argument("'" + head().path() + "' (architecture " + arch_ + ") lacks the metadata key '" +
                            arch_ + "." + std::string(key) + "'");
  return *v;
}

Result<std::optional<int64_t>> GgufHfMap::opt_int(std::string_view key) const {
  return head().meta_int(arch_ + "." + std::string(key));
}

Result<std::optional<double>> GgufHfMap::opt_float(std::string_view key) const {
  return head().meta_float(arch_ + "." + std::string(key));
}

Result<std::optional<bool>> GgufHfMap::opt_bool(std::string_view key) const {
  return head().meta_bool(arch_ + "." + std::string(key));
}

Result<const json*> GgufHfMap::opt_array(std::string_view key) const {
  const std::string k = arch_ + "." + std::string(key);
  const json* v = head().find_meta(k);
  if (v && !v->is_array()) return invalid_argument(meta_type_error(k, head().path(), "an array"));
  return v;
}

Result<std::optional<std::vector<int64_t>>> GgufHfMap::opt_int_list(std::string_view key) const {
  HYPIC_ASSIGN_OR_RETURN(const json* v, opt_array(key));
  if (!v) return std::optional<std::vector<int64_t>>();
  std::vector<int64_t> out;
  for (const json& e : *v) {
    if (e.is_boolean()) out.push_back(e.get<bool>() ? 1 : 0);
    else if (e.is_number_integer()) out.push_back(e.get<int64_t>());
    else return invalid_argument(meta_type_error(arch_ + "." + std::string(key), head().path(), "an array of integers or booleans"));
  }
  return std::optional<std::vector<int64_t>>(std::move(out));
}

Result<std::optional<std::vector<double>>> GgufHfMap::opt_float_list(std::string_view key) const {
  HYPIC_ASSIGN_OR_RETURN(const json* v, opt_array(key));
  if (!v) return std::optional<std::vector<double>>();
  std::vector<double> out;
  for (const json& e : *v) {
    if (!e.is_number()) return invalid_argument(meta_type_error(arch_ + "." + std::string(key), head().path(), "an array of numbers"));
    out.push_back(e.get<double>());
  }
  return std::optional<std::vector<double>>(std::move(out));
}

const GgufTensorInfo* GgufHfMap::find(std::string_view gguf) const {
  auto it = index_.find(std::string(gguf));
  return it == index_.end() ? nullptr : it->second.second;
}

Result<const GgufTensorInfo*> GgufHfMap::need(const std::string& gguf) const {
  const GgufTensorInfo* t = find(gguf);
  if (!t)
    return not_found("'" + head().path() + "' (architecture " + arch_ + ") has no tensor '" + gguf +
                     "', which its metadata implies; the file is incomplete or not written by llama.cpp's converter");
  return t;
}

Result<Shape> GgufHfMap::shape(const std::string& gguf) const {
  HYPIC_ASSIGN_OR_RETURN(const GgufTensorInfo* t, need(gguf));
  return t->shape;
}

Status GgufHfMap::alias(const std::string& hf, const std::string& gguf, Shape shape, int64_t row0, int64_t rows) {
  HYPIC_ASSIGN_OR_RETURN(const GgufTensorInfo* t, need(gguf));
  const int64_t outer = t->shape.empty() ? 1 : t->shape[0];
  if (rows < 0) rows = outer, row0 = 0;
  if (shape.empty()) shape = t->shape;
  if (row0 < 0 || row0 + rows > outer || numel(shape) * outer != t->elements() * rows)
    return invalid_argument("tensor '" + gguf + "' of '" + head().path() + "' has shape " + shape_str(t->shape) +
                            ", which does not hold " + hf + " " + shape_str(shape) +
                            "; the metadata does not describe the tensors");
  used_.insert(gguf);
  const size_t part = index_.at(gguf).first;
  std::shared_ptr<const GgufFile> f = parts_[part];
  Checkpoint::Provided p;
  p.shape = shape;
  p.dtype = ggml_type_info(t->type) ? ggml_type_info(t->type)->name : "?";
  p.nbytes = t->nbytes / uint64_t(outer) * uint64_t(rows);
  p.make = [f, t, row0, rows, shape] { return read_rows(*f, *t, row0, rows, shape, false); };
  tensors_[hf] = std::move(p);
  return Status::ok();
}

Status GgufHfMap::derive(const std::string& hf, const std::vector<std::string>& gguf, Shape shape, GgufUndo undo) {
  std::vector<std::pair<std::shared_ptr<const GgufFile>, const GgufTensorInfo*>> src;
  Checkpoint::Provided p;
  for (const std::string& g : gguf) {
    HYPIC_ASSIGN_OR_RETURN(const GgufTensorInfo* t, need(g));
    used_.insert(g);
    src.emplace_back(parts_[index_.at(g).first], t);
    p.nbytes += t->nbytes;
    p.dtype = ggml_type_info(t->type) ? ggml_type_info(t->type)->name : "?";
  }
  p.shape = shape;
  p.make = [src, shape, undo]() -> Result<Tensor> {
    std::vector<Tensor> in;
    for (const auto& [f, t] : src) {
      const int64_t outer = t->shape.empty() ? 1 : t->shape[0];
      HYPIC_ASSIGN_OR_RETURN(Tensor x, read_rows(*f, *t, 0, outer, t->shape, true));
      in.push_back(std::move(x));
    }
    Tensor out = Tensor::zeros_f32(shape);
    undo(in, out);
    return out;
  };
  tensors_[hf] = std::move(p);
  return Status::ok();
}

Result<Checkpoint> GgufHfMap::finish(const std::string& origin) {
  for (const std::string& name : used_) {
    const GgufTensorInfo* t = find(name);
    const GgmlTypeInfo* ti = ggml_type_info(t->type);
    if (!ti || !ti->supported)
      return unsupported("tensor '" + name + "' of '" + head().path() + "' is stored as " +
                         (ti ? std::string(ti->name) : "ggml type " + std::to_string(t->type)) +
                         ", which hypic does not read (it reads F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K and "
                         "Q6_K: the types of Q8_0, Q4_0, Q4_K_M, Q5_K_M and Q6_K files); use such a file");
  }
  std::vector<std::shared_ptr<const GgufFile>> parts = parts_;
  return Checkpoint::from_provided(origin, std::move(tensors_), [parts](const void* p, size_t n) {
    for (const auto& f : parts)
      if (f->release_pages(p, n)) return true;
    return false;
  });
}

bool is_gguf_path(const std::string& path) {
  std::error_code ec;
  return fs::path(path).extension() == ".gguf" && fs::is_regular_file(path, ec);
}

Result<GgufModel> open_gguf_model(const std::string& path) {
  HYPIC_ASSIGN_OR_RETURN(GgufFile first, GgufFile::open(path));
  HYPIC_ASSIGN_OR_RETURN(std::vector<std::string> names, split_parts(path, first));
  GgufModel m;
  m.parts.push_back(std::make_shared<const GgufFile>(std::move(first)));
  for (size_t i = 1; i < names.size(); ++i) {
    auto part = GgufFile::open(names[i]);
    if (!part.is_ok())
      return part.status().with_context("opening part " + std::to_string(i + 1) + " of " +
                                        std::to_string(names.size()) + " of the split GGUF '" + path + "'");
    m.parts.push_back(std::make_shared<const GgufFile>(std::move(part).value()));
  }
  HYPIC_ASSIGN_OR_RETURN(std::optional<std::string> arch, m.parts[0]->meta_string("general.architecture"));
  if (!arch) return invalid_argument("'" + path + "' has no general.architecture: not a GGUF model file");
  m.architecture = *arch;
  const ArchEntry* entry = nullptr;
  for (const ArchEntry& e : kArchs)
    if (m.architecture == e.name) entry = &e;
  if (!entry) {
    std::string known;
    for (const ArchEntry& e : kArchs)
      known += (known.empty() ? "" : ", ") + std::string(e.name);
    return unsupported("'" + path + "' holds a '" + m.architecture + "' model, which hypic does not run "
                       "(it serves hybrid linear-attention models; from GGUF: " + known + ")");
  }
  GgufHfMap map(m.parts, m.architecture);
  m.config = json::object();
  HYPIC_RETURN_IF_ERROR(entry->map(map, m.config).with_context("mapping the " + m.architecture + " GGUF '" + path + "'"));
  HYPIC_ASSIGN_OR_RETURN(m.weights, map.finish(path));
  Sha256 h;
  for (const auto& p : m.parts) h.update(p->fingerprint());
  m.fingerprint = m.parts.size() == 1 ? m.parts[0]->fingerprint() : h.final_hex();
  return m;
}

}  // namespace hypic
