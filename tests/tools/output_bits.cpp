// hypic_output_bits: one SHA-256 per output of every committed checkpoint (tests/models/*
// and models/hypic-tiny), in f32, bf16, int8 and q4 — forward logits of every position,
// composed prefills in every PIC mode at seams 0 / 2 / 8 with greedy decode steps after
// them, a batched decode of three sequences, and the serialised segment entries. Printed
// as JSON lines {"case": ..., "sha256": ...}.
//
// Not a test: what it prints depends on the CPU's kernel tier. scripts/compare_outputs.py
// runs it from two builds on one machine and compares, to prove that a change which must
// not alter results (a refactoring) alters no output bit.
//
//   hypic_output_bits [SOURCE_DIR] [--models a,b] [--dtypes f32,bf16]
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cache/prefix_cache.h"
#include "cache/segment_store.h"
#include "core/hash.h"
#include "engine/compose.h"
#include "entry/segment_entry.h"
#include "model/model.h"

namespace hypic {
namespace {

std::vector<int32_t> doc(uint32_t seed, int n, int vocab) {
  std::mt19937 g(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = int32_t(g() % uint32_t(vocab));
  return t;
}

void emit(const std::string& name, const void* data, size_t n) {
  std::printf("{\"case\": \"%s\", \"sha256\": \"%s\"}\n", name.c_str(), Sha256::hex(data, n).c_str());
  std::fflush(stdout);
}
void emit(const std::string& name, const std::vector<float>& v) {
  emit(name, v.data(), v.size() * sizeof(float));
}
void fail(const std::string& name, const Status& s) {
  std::printf("{\"case\": \"%s\", \"error\": \"%s\"}\n", name.c_str(), s.to_string().c_str());
}

int32_t argmax(const std::vector<float>& v, size_t off, size_t n) {
  return int32_t(std::max_element(v.begin() + off, v.begin() + off + n) - (v.begin() + off));
}

// Greedy continuation: the logits of `steps` decode steps after `logits`.
std::vector<float> decode(const Model& m, SeqState& st, std::vector<float> logits, int steps) {
  std::vector<float> all;
  for (int i = 0; i < steps; ++i) {
    const int32_t t = argmax(logits, 0, logits.size());
    if (!m.forward(st, {t}, LogitsFor::kLast, &logits).is_ok()) break;
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

void run_model(const std::string& dir, const std::string& tag, DType dt) {
  auto loaded = Model::load(dir, {dt, false});
  if (!loaded.is_ok()) return fail(tag + " load", loaded.status());
  const Model& m = **loaded;
  const int V = int(m.config().vocab_size);
  const int vocab = std::min(V, 500);

  {  // Forward, every position's logits.
    SeqState st = m.new_state(64);
    std::vector<float> lg;
    const Status s = m.forward(st, doc(7, 40, vocab), LogitsFor::kAll, &lg);
    s.is_ok() ? emit(tag + " forward", lg) : fail(tag + " forward", s);
  }

  PromptParts p;
  p.prefix = doc(900, 12, vocab);
  p.segments = {doc(1, 30, vocab), doc(2, 20, vocab), doc(3, 40, vocab)};
  p.suffix = doc(901, 9, vocab);
  for (PicMode mode : {PicMode::kFull, PicMode::kPrefix, PicMode::kHypic, PicMode::kNaive}) {
    for (int seam : {0, 2, 8}) {
      SegmentStore::Options so;
      so.mem_budget_bytes = size_t(256) << 20;
      auto store = std::shared_ptr<SegmentStore>(std::move(SegmentStore::open(so)).value());
      const Composer c(m, store, std::make_shared<PrefixCache>(size_t(64) << 20));
      ComposeOptions o;
      o.mode = mode;
      o.seam = seam;
      const std::string name = tag + " compose " + pic_mode_name(mode) + " seam " + std::to_string(seam);
      for (const char* pass : {"cold", "warm"}) {
        SeqState st = m.new_state(p.total_tokens() + 8);
        std::vector<float> lg;
        ComposeStats stats;
        const Status s = c.prefill(make_request(m, p, o.seam, o.salt), o, &st, &lg, &stats);
        if (!s.is_ok()) {
          fail(name + " " + pass, s);
          break;
        }
        std::vector<float> out = lg, more = decode(m, st, lg, 4);
        out.insert(out.end(), more.begin(), more.end());
        emit(name + " " + pass, out);
      }
    }
  }

  {  // Batched decode: three sequences at different positions, four steps.
    std::vector<SeqState> sts;
    std::vector<int32_t> next;
    for (int b = 0; b < 3; ++b) {
      sts.push_back(m.new_state(64));
      std::vector<float> lg;
      (void)m.forward(sts.back(), doc(20 + b, 10 + 7 * b, vocab), LogitsFor::kLast, &lg);
      next.push_back(argmax(lg, 0, lg.size()));
    }
    std::vector<SeqState*> ptrs;
    for (SeqState& s : sts) ptrs.push_back(&s);
    std::vector<float> all, lg;
    for (int step = 0; step < 4; ++step) {
      const Status s = m.decode_batch(ptrs, next, &lg);
      if (!s.is_ok()) return fail(tag + " decode_batch", s);
      all.insert(all.end(), lg.begin(), lg.end());
      for (int b = 0; b < 3; ++b) next[size_t(b)] = argmax(lg, size_t(b) * size_t(V), size_t(V));
    }
    emit(tag + " decode_batch", all);
  }

  for (int seam : {0, 8}) {  // The segment-entry file's bytes.
    const std::string name = tag + " entry seam " + std::to_string(seam);
    auto e = m.build_entry(doc(5, 48, vocab), seam);
    if (!e.is_ok()) {
      fail(name, e.status());
      continue;
    }
    e->key = segment_key(m.fingerprint(), m.compute_type(), seam, "", e->tokens);
    auto bytes = serialize_entry(*e);
    bytes.is_ok() ? emit(name, bytes->data(), bytes->size()) : fail(name, bytes.status());
  }
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string x; std::getline(ss, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

}  // namespace
}  // namespace hypic

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  using namespace hypic;
  std::string src = HYPIC_SOURCE_DIR;
  std::vector<std::string> models, dtypes = {"f32", "bf16", "q8", "q4"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--models" && i + 1 < argc) models = split(argv[++i]);
    else if (a == "--dtypes" && i + 1 < argc) dtypes = split(argv[++i]);
    else if (a == "-h" || a == "--help") {
      std::printf("usage: %s [SOURCE_DIR] [--models a,b] [--dtypes f32,bf16,q8,q4]\n", argv[0]);
      return 0;
    } else src = a;
  }
  std::vector<std::pair<std::string, std::string>> dirs;  // name, path
  for (const auto& e : fs::directory_iterator(src + "/tests/models"))
    if (fs::exists(e.path() / "config.json")) dirs.emplace_back(e.path().filename().string(), e.path().string());
  dirs.emplace_back("hypic-tiny", src + "/models/hypic-tiny");
  std::sort(dirs.begin(), dirs.end());
  for (const auto& [name, path] : dirs) {
    if (!models.empty() && std::find(models.begin(), models.end(), name) == models.end()) continue;
    for (const std::string& d : dtypes) {
      const DType dt = d == "f32" ? DType::kF32 : d == "bf16" ? DType::kBF16 : d == "q8" ? DType::kQ8 : DType::kQ4;
      if (d != "f32" && d != "bf16" && d != "q8" && d != "q4") {
        std::fprintf(stderr, "unknown dtype %s\n", d.c_str());
        return 2;
      }
      std::fprintf(stderr, "%s %s\n", name.c_str(), d.c_str());
      run_model(path, name + " " + d, dt);
    }
  }
  return 0;
}
