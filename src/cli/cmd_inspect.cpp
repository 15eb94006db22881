// hypic inspect: architecture summary of a model directory or GGUF file (and a check that it loads).
#include <cstdio>

#include <map>
#include <string>

#include "checkpoint/checkpoint.h"
#include "checkpoint/gguf.h"
#include "checkpoint/gguf_hf.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "core/timer.h"
#include "model/model.h"

namespace hypic::cli {

namespace {

// A GGUF file's header: version, architecture and name, metadata count, tensors by type (the
// types hypic does not read marked), data size, fingerprint.
int inspect_gguf(const std::string& path) {
  auto f = GgufFile::open(path);
  if (!f) return report_error("inspect", f.status());
  auto arch = f->meta_string("general.architecture");
  auto name = f->meta_string("general.name");
  std::printf("GGUF version %u, architecture %s%s%s, %zu metadata keys, alignment %llu\n", f->version(),
              arch.is_ok() && *arch ? arch->value().c_str() : "(none)",
              name.is_ok() && *name ? ", name " : "", name.is_ok() && *name ? name->value().c_str() : "",
              f->metadata().size(), (unsigned long long)f->alignment());
  std::map<std::string, std::pair<size_t, uint64_t>> by_type;  // name -> tensors, bytes
  uint64_t total = 0;
  for (const GgufTensorInfo& t : f->tensors()) {
    const GgmlTypeInfo* ti = ggml_type_info(t.type);
    auto& [n, bytes] = by_type[std::string(ti->name) + (ti->supported ? "" : " (not read by hypic)")];
    ++n;
    bytes += t.nbytes;
    total += t.nbytes;
  }
  std::printf("tensors: %zu, %.1f MiB of data; fingerprint %s\n", f->tensors().size(), double(total) / (1 << 20),
              f->fingerprint().c_str());
  for (const auto& [type, nb] : by_type)
    std::printf("  %-28s %6zu tensors  %10.1f MiB\n", type.c_str(), nb.first, double(nb.second) / (1 << 20));
  return 0;
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  Args a("hypic inspect --model DIR|FILE.gguf [--load]",
         "Prints the architecture summary from config.json and the checkpoint's tensors; for a GGUF\n"
         "file its header: version, architecture, metadata, tensors by type.");
  a.opt("model", "DIR|FILE.gguf", "model directory, or a GGUF file")
      .opt("load", "", "also load every weight (validates all shapes) and report the time")
      .opt("dtype", kDtypeValues, kDtypeHelp, "bf16");
  if (auto done = parse_command(a, argc, argv, "inspect", {"model"})) return *done;
  auto dt = parse_dtype(a.str("dtype"));  // checked before anything is printed
  if (!dt) return report_error("inspect", dt.status());
  const std::string model = a.str("model");
  const bool gguf = is_gguf_path(model);
  if (gguf)
    if (const int rc = inspect_gguf(model); rc != 0) return rc;
  auto cfg = ModelConfig::from_dir(model);
  if (!cfg) return report_error("inspect", cfg.status());
  if (gguf) {
    auto g = open_gguf_model(model);
    if (!g) return report_error("inspect", g.status());
    cfg->resolve_head(g->weights.has("lm_head.weight"));
    std::printf("%s\n", cfg->summary().c_str());
    std::printf("as a Hugging Face checkpoint: %zu tensors\n", g->weights.num_tensors());
  } else {
    auto ck = Checkpoint::open(model);
    if (ck) cfg->resolve_head(ck->has("lm_head.weight"));
    std::printf("%s\n", cfg->summary().c_str());
    if (!ck) return report_error("inspect", ck.status());
    std::printf("checkpoint: %zu tensors in %zu file(s), %.1f MiB\n", ck->num_tensors(),
                ck->files().size(), double(ck->total_bytes()) / (1 << 20));
  }
  if (a.flag("load")) {
    Timer t;
    LoadOptions lo;
    lo.compute = *dt;
    auto m = Model::load(a.str("model"), lo);
    if (!m) return report_error("inspect", m.status());
    std::printf("loaded and validated all weights in %.2f s\n", t.seconds());
  }
  return 0;
}

}  // namespace hypic::cli
