// Model::load: config.json + safetensors → the architecture's layers (model/arch.h).
#include <charconv>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include <unistd.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/gguf_hf.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/quant.h"
#include "core/timer.h"
#include "model/arch.h"
#include "model/mixer.h"
#include "model/model.h"
#include "model/weight_reader.h"

namespace hypic {

Tensor concat_rows(const std::vector<Tensor>& parts, DType t) {
  if (t == DType::kQ4T) return concat_rows(parts, DType::kQ4).to(t);  // regrouped once
  int64_t rows = 0;
  for (const auto& p : parts) rows += p.dim(0);
  Tensor out = Tensor::zeros(t, {rows, parts[0].dim(1)});
  char* dst = static_cast<char*>(out.raw());
  for (const auto& p : parts) {
    Tensor c = p.dtype() == t ? p : p.to(t);
    std::memcpy(dst, c.raw(), c.nbytes());
    dst += c.nbytes();
  }
  return out;
}

namespace {

// The process's anonymous resident memory (RssAnon of /proc/self/status: the weights it owns,
// not the pages of the mapped checkpoint, which the kernel may drop), 0 where unavailable.
size_t resident_bytes() {
  std::ifstream f("/proc/self/status");
  std::string key;
  size_t kb = 0;
  while (f >> key) {
    if (key == "RssAnon:" && (f >> kb)) return kb << 10;
    f.ignore(1 << 10, '\n');
  }
  return 0;
}

// Identity of the weights for segment keys, without hashing gigabytes at every start:
// SHA-256 over config.json, every tensor's name, dtype, shape and byte range, and the first
// and last 64 KiB of every tensor's data. Two checkpoints that differ only in the interior
// of a tensor collide; retrained or re-quantised weights change the sampled bytes.
std::string checkpoint_fingerprint(const std::string& dir, const Checkpoint& ck) {
  Sha256 h;
  std::ifstream f(dir + "/config.json", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  h.update(ss.str());
  for (const std::string& name : ck.names()) {
    const SafetensorsEntry* e = ck.entry(name);
    h.update(name + "|" + e->dtype + "|" + shape_str(e->shape) + "|" + std::to_string(e->nbytes()) + "\n");
    auto raw = ck.get_raw(name);
    if (!raw) continue;
    const auto& b = raw->bytes;
    const size_t k = std::min<size_t>(b.size(), 64 << 10);
    h.update(b.data(), k);
    if (b.size() > k) h.update(b.data() + b.size() - k, k);
  }
  return h.final_hex();
}

// A checkpoint whose decoder layers go past the config's is not the model the config
// describes (a wrong config.json, or num_hidden_layers cut down): refuse it rather than run
// part of it.
Status check_no_unused_layers(const Checkpoint& ck, const ModelConfig& c, const std::string& dir) {
  const std::string layers = c.weight_prefix + "layers.";
  for (const std::string& name : ck.names()) {
    if (name.compare(0, layers.size(), layers) != 0) continue;
    const char* p = name.data() + layers.size();
    const char* end = name.data() + name.size();
    int64_t idx = 0;
    auto [q, ec] = std::from_chars(p, end, idx);
    if (ec != std::errc() || q == p || q == end || *q != '.') continue;
    // Multi-token-prediction layers may follow the decoder layers (Ling-3.0); unused here.
    if (idx >= c.num_hidden_layers + c.trailing_mtp_layers)
      return invalid_argument(dir + " holds tensors of decoder layer " + std::to_string(idx) +
                              " ('" + name + "'), but config.json's num_hidden_layers is " +
                              std::to_string(c.num_hidden_layers) + ": the config does not "
                              "describe this checkpoint; use the config.json it was saved with");
  }
  return Status::ok();
}

}  // namespace

Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::load(const std::string& dir, const LoadOptions& opt) {
  if (opt.compute == DType::kF16)
    return invalid_argument("the matrix type must be F32, BF16, INT8 or Q4 (--dtype f32|bf16|int8|q4)");
  Timer timer;
  const HugePageScope weights_on_huge_pages;
  // A GGUF file is seen as the Hugging Face checkpoint it was converted from (gguf_hf.h).
  std::optional<GgufModel> gguf;
  if (is_gguf_path(dir)) {
    HYPIC_ASSIGN_OR_RETURN(gguf, open_gguf_model(dir));
    HYPIC_LOG_INFO("%s: GGUF architecture %s", dir.c_str(), gguf->architecture.c_str());
  }
  HYPIC_ASSIGN_OR_RETURN(ModelConfig cfg, gguf ? ModelConfig::from_json(gguf->config.dump(), dir + " (metadata)")
                                               : ModelConfig::from_file(dir + "/config.json"));
  HYPIC_ASSIGN_OR_RETURN(Checkpoint ck, gguf ? Result<Checkpoint>(std::move(gguf->weights)) : Checkpoint::open(dir));
  HYPIC_ASSIGN_OR_RETURN(cfg.weight_prefix, detect_weight_prefix(ck.names()));
  HYPIC_RETURN_IF_ERROR(check_no_unused_layers(ck, cfg, dir));
  const bool has_head = ck.has("lm_head.weight");
  cfg.resolve_head(has_head);
  std::unique_ptr<Model> m(new Model());
  m->cfg_ = cfg;
  m->compute_ = opt.compute;
  m->dir_ = dir;
  const bool loud = opt.progress && ck.total_bytes() >= Checkpoint::kLargeBytes;
  const WeightReader rd(ck, opt.compute, opt.matrix_names);
  const std::string& P = cfg.weight_prefix;
  const int64_t H = cfg.hidden_size, V = cfg.vocab_size;
  auto& w = m->w_;
  auto ctx = [&](const char* what) { return std::string("loading ") + what + " from " + dir; };

  {
    const std::vector<std::string> names = cfg.arch->embedding_names();
    std::string name = P + names.front();
    for (const std::string& n : names)
      if (ck.has(P + n)) name = P + n;
    auto e = ck.get(name, {V, H});
    if (!e.is_ok()) return e.status().with_context(ctx("embeddings"));
    w.embed = e.value();
  }
  w.layers.resize(size_t(cfg.num_hidden_layers));
  for (int i = 0; i < cfg.num_hidden_layers; ++i) {
    const std::string p = P + "layers." + std::to_string(i) + ".";
    Status s = cfg.arch->load_layer(rd, cfg, i, p, &w.layers[size_t(i)]);
    if (!s.is_ok()) return s.with_context("loading layer " + std::to_string(i) + " from " + dir);
    if (loud)
      HYPIC_LOG_INFO("loading %s: layer %d/%d (%.1f s)", dir.c_str(), i + 1,
                     int(cfg.num_hidden_layers), timer.seconds());
  }
  for (const DecoderLayer& l : w.layers) {
    m->history_ = std::max(m->history_, l.token->history_tokens());
    LayerState shapes = l.token->new_state(0);
    for (auto* v : {&shapes.fixed, &shapes.rows})
      for (NamedTensor& n : *v) n.t = Tensor::view(n.t.dtype(), n.t.shape(), nullptr, nullptr);
    m->layout_.layers.push_back(std::move(shapes));
  }
  {
    auto n = rd.vec(P + "norm.weight", {H});
    if (!n.is_ok()) return n.status().with_context(ctx("final norm"));
    w.final_norm = n.value();
  }
  if (!has_head || cfg.tie_word_embeddings) {
    if (!cfg.tie_word_embeddings)
      return not_found("lm_head.weight is missing from " + dir +
                       " and tie_word_embeddings is false; the checkpoint is incomplete");
    // Not through rd: the embedding itself stays as stored (its rows are looked up).
    if (Status q = check_quantizable(opt.compute, H); !q.is_ok())
      return q.with_context(ctx("lm_head (the tied embedding)"));
    const DType mt = matrix_dtype(opt.compute);
    const bool as_stored = w.embed.dtype() == mt || (dtype_ggml(w.embed.dtype()) && opt.compute != DType::kF32);
    w.lm_head = as_stored ? w.embed : w.embed.to(mt);
  } else {
    auto t = rd.mat("lm_head.weight", {V, H});
    if (!t.is_ok()) return t.status().with_context(ctx("lm_head"));
    w.lm_head = t.value();
  }
  m->fingerprint_ = gguf ? gguf->fingerprint : checkpoint_fingerprint(dir, ck);
  if (loud)
    HYPIC_LOG_INFO("loaded %s in %.1f s (matrices %s, %.2f GiB resident)", dir.c_str(),
                   timer.seconds(), dtype_name(opt.compute), double(resident_bytes()) / (1 << 30));
  return m;
}

}  // namespace hypic
