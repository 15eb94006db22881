#include "checkpoint/quantize.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/stored_quant.h"
#include "core/log.h"
#include "core/quant.h"
#include "core/timer.h"

namespace hypic {
namespace {

namespace fs = std::filesystem;

// An owned byte buffer as a RawTensor.
RawTensor owned(const std::string& dtype, Shape shape, std::vector<uint8_t> bytes) {
  auto buf = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  RawTensor r;
  r.dtype = dtype;
  r.shape = std::move(shape);
  r.bytes = {buf->data(), buf->size()};
  r.owner = buf;
  return r;
}

}  // namespace

std::pair<RawTensor, RawTensor> stored_quant_parts(const Tensor& q) {
  const bool q8 = q.dtype() == DType::kQ8;
  const int64_t K = q.dim(-1), rows = q.numel() / K;
  const size_t rb = dtype_row_bytes(q.dtype(), K), cb = size_t(q8 ? K : K / 2), sb = rb - cb;
  std::vector<uint8_t> codes(size_t(rows) * cb), scales(size_t(rows) * sb);
  const auto* src = static_cast<const uint8_t*>(q.raw());
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = src + size_t(r) * rb;
    uint8_t* c = codes.data() + size_t(r) * cb;
    if (q8) {
      for (size_t k = 0; k < cb; ++k) c[k] = uint8_t(int8_t(int(row[k]) - 128));
    } else {
      std::memcpy(c, row, cb);
    }
    std::memcpy(scales.data() + size_t(r) * sb, row + cb, sb);
  }
  Shape cs = q.shape(), ss = q.shape();
  if (q8) {
    ss.pop_back();
  } else {
    cs.back() = K / 2;
    ss.back() = K / kQ4Group;
  }
  return {owned(q8 ? "I8" : "U8", cs, std::move(codes)),
          owned(q8 ? "F32" : "F16", ss, std::move(scales))};
}

nlohmann::json stored_quant_config(DType t) {
  nlohmann::json q = {{"quant_method", "hypic"},
                      {"hypic_dtype", t == DType::kQ8 ? "int8" : "q4"},
                      {"format", "model/stored_quant.h: codes X (I8 / U8) and scales X.scale"}};
  if (t == DType::kQ4) q["group_size"] = kQ4Group;
  return q;
}

namespace {

Status write_config(const std::string& dir, const std::string& tmp, DType t) {
  std::ifstream in(dir + "/config.json");
  nlohmann::json cfg;
  try {
    cfg = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    return invalid_argument(dir + "/config.json: " + e.what());
  }
  cfg["quantization_config"] = stored_quant_config(t);
  std::ofstream out(tmp + "/config.json");
  out << cfg.dump(2) << "\n";
  return out.good() ? Status::ok() : io_error("cannot write " + tmp + "/config.json");
}

}  // namespace

Status quantize_checkpoint(const std::string& dir, const std::string& out, const QuantizeOptions& o,
                           const MatrixNames& matrices) {
  if (!dtype_packed(o.dtype)) return invalid_argument("hypic quantize writes int8 or q4 (--dtype)");
  std::error_code ec;
  if (fs::exists(out, ec))
    return invalid_argument(out + " exists; choose a new output directory (nothing was written)");
  Timer timer;
  // The loader decides which tensors are matrices and checks that they fit the type.
  HYPIC_ASSIGN_OR_RETURN(const std::set<std::string> mats, matrices());
  HYPIC_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(dir));
  // Shards planned by output size before anything is quantized (one shard in memory at once).
  std::vector<std::vector<std::string>> shards(1);
  uint64_t in_shard = 0, total = 0;
  for (const std::string& name : ck.names()) {
    if (is_quant_companion(ck, name) && !mats.count(name)) continue;  // rewritten with its matrix
    const SafetensorsEntry* e = ck.entry(name);
    uint64_t bytes = e->nbytes();
    if (mats.count(name)) {  // the matrix's logical shape, from the header alone
      Shape sh = e->shape;
      if (e->dtype == "U8") sh.back() *= 2;  // stored q4 codes: two per byte
      bytes = uint64_t(shape_numel(sh) / sh.back()) * dtype_row_bytes(o.dtype, sh.back());
    }
    if (in_shard > 0 && in_shard + bytes > o.shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(name);
    in_shard += bytes;
    total += bytes;
  }
  const std::string tmp = out + ".partial";
  fs::remove_all(tmp, ec);
  if (!fs::create_directories(tmp, ec))
    return io_error("cannot create " + tmp + ": " + ec.message());
  auto fail = [&](Status s) {
    fs::remove_all(tmp, ec);
    return s;
  };
  nlohmann::json index = {{"metadata", {{"total_size", total}, {"hypic_quantized", true}}},
                          {"weight_map", nlohmann::json::object()}};
  const size_t n = shards.size();
  for (size_t i = 0; i < n; ++i) {
    char fname[64];
    std::snprintf(fname, sizeof fname, "model-%05zu-of-%05zu.safetensors", i + 1, n);
    std::vector<std::pair<std::string, RawTensor>> tensors;
    for (const std::string& name : shards[i]) {
      if (mats.count(name)) {
        auto t = ck.get_unchecked(name);
        if (!t.is_ok()) return fail(t.status());
        const Tensor q = t->dtype() == o.dtype ? *t : t->to(o.dtype);
        auto [codes, scales] = stored_quant_parts(q);
        tensors.emplace_back(name, std::move(codes));
        tensors.emplace_back(name + ".scale", std::move(scales));
        index["weight_map"][name + ".scale"] = fname;
      } else {
        auto r = ck.get_raw(name);
        if (!r.is_ok()) return fail(r.status());
        tensors.emplace_back(name, *r);
      }
      index["weight_map"][name] = fname;
    }
    if (Status s = write_safetensors_raw(tmp + "/" + fname, tensors); !s.is_ok()) return fail(s);
    if (o.progress)
      HYPIC_LOG_INFO("quantize: wrote shard %zu/%zu (%.1f s)", i + 1, n, timer.seconds());
  }
  {
    std::ofstream f(tmp + "/model.safetensors.index.json");
    f << index.dump(2) << "\n";
    if (!f.good()) return fail(io_error("cannot write the shard index in " + tmp));
  }
  if (Status s = write_config(dir, tmp, o.dtype); !s.is_ok()) return fail(s);
  for (const auto& f : fs::directory_iterator(dir, ec)) {
    const std::string fn = f.path().filename().string();
    if (!f.is_regular_file() || fn == "config.json" || fn == "model.safetensors.index.json" ||
        f.path().extension() == ".safetensors")
      continue;
    fs::copy_file(f.path(), tmp + "/" + fn, ec);
    if (ec) return fail(io_error("cannot copy " + f.path().string() + ": " + ec.message()));
  }
  fs::rename(tmp, out, ec);
  if (ec) return fail(io_error("cannot rename " + tmp + " to " + out + ": " + ec.message()));
  if (o.progress)
    HYPIC_LOG_INFO("quantize: %s → %s (%s, %zu matrices, %.2f GiB) in %.1f s", dir.c_str(),
                   out.c_str(), dtype_name(o.dtype), mats.size(), double(total) / (1 << 30),
                   timer.seconds());
  return Status::ok();
}

}  // namespace hypic
