// write_synthetic_checkpoint: a family's Layout (synthetic_<family>.cpp) written as bf16
// shards with an index (or with the matrices stored quantized).
#include "synthetic/synthetic.h"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>

#include "checkpoint/quantize.h"
#include "checkpoint/safetensors.h"
#include "core/log.h"
#include "core/parallel.h"
#include "model/quantize_model.h"
#include "synthetic/synthetic_layout.h"

namespace hypic {
namespace {

// The built-in shapes and those registered at run time (register_synthetic_shape).
struct Shapes {
  std::mutex mu;
  std::map<std::string, synthetic::Builder> builders;
};

Shapes& shapes() {
  static Shapes* const s = [] {
    auto* r = new Shapes;  // never destroyed: registrations may come from static objects
    synthetic::add_qwen_shapes(&r->builders);
    synthetic::add_lightning_shapes(&r->builders);
    synthetic::add_kda_shapes(&r->builders);
    return r;
  }();
  return *s;
}

// A copy of the builder of `shape` (null when unknown), taken under the lock.
synthetic::Builder builder_of(const std::string& shape) {
  Shapes& s = shapes();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.builders.find(shape);
  return it == s.builders.end() ? nullptr : it->second;
}

// Counter-based uniform generator (splitmix64), so shards can be filled in parallel and the
// result does not depend on the thread count.
inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

Tensor random_bf16(Shape s, float mean, float stddev, uint64_t seed) {
  Tensor t = Tensor::zeros(DType::kBF16, std::move(s));
  uint16_t* p = t.u16();
  const int64_t n = t.numel(), block = 1 << 16;
  const float a = stddev * std::sqrt(3.0f);  // uniform(-a, a) has this std
  parallel_for((n + block - 1) / block, [&](int64_t b) {
    for (int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i) {
      const float u = float(mix(seed * 0x100000001b3ull + uint64_t(i)) >> 40) / float(1 << 24);
      p[i] = f32_to_bf16(mean + a * (2.0f * u - 1.0f));
    }
  });
  return t;
}

// A tensor name with every run of digits replaced by '#': the same pattern for every layer
// and expert index.
std::string name_pattern(const std::string& name) {
  std::string r;
  for (size_t i = 0; i < name.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(name[i]))) {
      if (r.empty() || r.back() != '#') r += '#';
    } else {
      r += name[i];
    }
  }
  return r;
}

// A tensor as the safetensors writer takes it, keeping its storage alive.
RawTensor raw_of(const Tensor& t) {
  auto keep = std::make_shared<Tensor>(t);
  RawTensor r;
  r.dtype = safetensors_dtype_name(t.dtype());
  r.shape = t.shape();
  r.bytes = {static_cast<const uint8_t*>(keep->raw()), keep->nbytes()};
  r.owner = keep;
  return r;
}

}  // namespace

namespace synthetic {

Result<int64_t> expert_count(const SyntheticOptions& opt, int64_t real, int64_t top_k) {
  if (opt.experts == 0) return real;
  if (opt.experts < top_k || opt.experts > real)
    return invalid_argument("--experts must be in [" + std::to_string(top_k) + " (top-k), " +
                            std::to_string(real) + " (the model's)], got " +
                            std::to_string(opt.experts));
  return int64_t(opt.experts);
}

}  // namespace synthetic

std::vector<std::string> synthetic_shapes() {
  Shapes& s = shapes();
  std::lock_guard<std::mutex> lock(s.mu);
  std::vector<std::string> r;
  for (const auto& [k, v] : s.builders) r.push_back(k);
  return r;
}

Status register_synthetic_shape(const std::string& name, synthetic::Builder build) {
  if (name.empty() || !build) return invalid_argument("register_synthetic_shape: a name and a builder are needed");
  Shapes& s = shapes();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.builders.emplace(name, std::move(build)).second)
    return invalid_argument("synthetic shape '" + name + "' is already registered");
  return Status::ok();
}

Status write_synthetic_checkpoint(const std::string& shape, const SyntheticOptions& opt,
                                  const std::string& out_dir) {
  const synthetic::Builder build = builder_of(shape);
  if (!build) {
    std::string known;
    for (const auto& s : synthetic_shapes()) known += " " + s;
    return invalid_argument("unknown shape '" + shape + "'; known:" + known);
  }
  if (opt.layers < 1 || opt.layers > 128) return invalid_argument("--layers must be in 1..128");
  if (opt.experts < 0) return invalid_argument("--experts must not be negative");
  if (opt.dtype != DType::kBF16 && !dtype_packed(opt.dtype))
    return invalid_argument("make-model writes bf16, int8 or q4 matrices");
  HYPIC_ASSIGN_OR_RETURN(synthetic::Layout L, build(opt));
  namespace fs = std::filesystem;
  std::error_code ec;
  std::set<std::string> matrices;  // name patterns (name_pattern) of the loader's matrices
  if (dtype_packed(opt.dtype)) {
    SyntheticOptions probe = opt;
    probe.dtype = DType::kBF16;
    probe.layers = std::min(opt.layers, 8);
    // Top-k experts keep the probe small (0 = the model's: a dense model).
    const nlohmann::json& tc = L.config.contains("text_config") ? L.config["text_config"] : L.config;
    probe.experts = tc.value("num_experts_per_tok", 0);
    const std::string dir = out_dir + ".probe";
    HYPIC_LOG_INFO("make-model: a %d-layer bf16 probe of the shape in %s first (which tensors "
                   "the loader quantizes)", probe.layers, dir.c_str());
    fs::remove_all(dir, ec);
    Status s = write_synthetic_checkpoint(shape, probe, dir);
    auto names = s.is_ok() ? loaded_matrix_names(dir, opt.dtype, false)
                           : Result<std::set<std::string>>(s);
    fs::remove_all(dir, ec);
    if (!names.is_ok()) return names.status().with_context("make-model: the probe model");
    for (const std::string& n : *names) matrices.insert(name_pattern(n));
    L.config["quantization_config"] = stored_quant_config(opt.dtype);
  }
  fs::create_directories(out_dir, ec);
  if (ec) return io_error("cannot create '" + out_dir + "': " + ec.message());
  {
    std::ofstream f(out_dir + "/config.json");
    f << L.config.dump(2) << "\n";
    if (!f) return io_error("cannot write " + out_dir + "/config.json");
  }
  const int shards = int(L.layers.size()) + 1;
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total = 0, tensor_seed = opt.seed * 1000003;
  auto shard_name = [&](int k) {
    char b[64];
    std::snprintf(b, sizeof b, "model-%05d-of-%05d.safetensors", k + 1, shards);
    return std::string(b);
  };
  for (int k = 0; k < shards; ++k) {
    const auto& specs = k + 1 == shards ? L.globals : L.layers[size_t(k)];
    std::vector<std::pair<std::string, RawTensor>> ts;
    for (const synthetic::TensorSpec& s : specs) {
      const Tensor t = random_bf16(s.shape, s.mean, s.sd, ++tensor_seed);
      if (matrices.count(name_pattern(s.name))) {
        auto [codes, scales] = stored_quant_parts(t.to(opt.dtype));
        ts.emplace_back(s.name + ".scale", std::move(scales));
        ts.emplace_back(s.name, std::move(codes));
      } else {
        ts.emplace_back(s.name, raw_of(t));
      }
    }
    for (const auto& [name, t] : ts) {
      weight_map[name] = shard_name(k);
      total += t.bytes.size();
    }
    HYPIC_RETURN_IF_ERROR(write_safetensors_raw(out_dir + "/" + shard_name(k), ts, {{"format", "pt"}}));
    HYPIC_LOG_INFO("make-model: wrote shard %d/%d (%.2f GiB so far)", k + 1, shards,
                   double(total) / (1u << 30));
  }
  nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  if (dtype_packed(opt.dtype)) index["metadata"]["hypic_quantized"] = true;
  std::ofstream f(out_dir + "/model.safetensors.index.json");
  f << index.dump(2) << "\n";
  if (!f) return io_error("cannot write the index in " + out_dir);
  return Status::ok();
}

}  // namespace hypic
