// A Hugging Face model directory's weights: `model.safetensors`, or shards listed by
// `model.safetensors.index.json` (weight_map: tensor name -> shard file), or, failing both,
// every `*.safetensors` file in the directory. All shards are memory-mapped and their
// headers validated when the checkpoint is opened; tensor data is read on first touch.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "checkpoint/safetensors.h"
#include "core/status.h"
#include "core/tensor.h"

namespace hypic {

struct CheckpointProgress {
  enum class Stage {
    kOpenShard,   // a shard's header was validated (bytes: shard file sizes)
    kLoadTensor,  // get() handed out a tensor for the first time (bytes: tensor data)
  };
  Stage stage = Stage::kOpenShard;
  std::string item;  // shard path or tensor name
  uint64_t done_bytes = 0, total_bytes = 0;
  size_t done_items = 0, total_items = 0;
};
// Called on the thread that opened the shard / called get(); get() may run on several
// threads, so the callback must be thread-safe if the loader fetches tensors in parallel.
using CheckpointProgressFn = std::function<void(const CheckpointProgress&)>;

class Checkpoint {
 public:
  // Checkpoints larger than this log their opening progress at INFO level.
  static constexpr uint64_t kLargeBytes = uint64_t(1) << 30;

  // `path` is a model directory (or a single .safetensors file). Errors name the file and
  // tensor: no weights found, a missing or invalid shard, a tensor the index places in a
  // shard that lacks it, a tensor present in two shards.
  static Result<Checkpoint> open(const std::string& path, CheckpointProgressFn progress = {});

  const std::string& dir() const { return dir_; }
  const std::vector<std::string>& files() const { return file_paths_; }  // shard paths
  const std::vector<std::string>& names() const { return names_; }       // sorted
  size_t num_tensors() const { return names_.size(); }
  uint64_t total_bytes() const { return total_bytes_; }  // sum of tensor data sizes

  bool has(const std::string& name) const { return loc_.count(name) != 0 || provided_.count(name) != 0; }
  const SafetensorsEntry* entry(const std::string& name) const;  // nullptr if absent
  const std::string* file_of(const std::string& name) const;     // nullptr if absent

  // A float tensor (F32/BF16/F16, zero-copy) whose shape must equal `expected`:
  // "tensor 'X' in file F has shape [..], config implies [..]". A matrix stored quantized
  // (checkpoint/stored_quant.h: hypic's int8 / q4 codes + scales, block-scaled FP8) comes back as
  // the engine's packed type or as owned BF16, its logical shape checked the same way.
  Result<Tensor> get(const std::string& name, const Shape& expected) const;
  // The same without the shape check, for callers that inspect shapes themselves.
  Result<Tensor> get_unchecked(const std::string& name) const;
  // Any dtype as raw bytes.
  Result<RawTensor> get_raw(const std::string& name) const;

  // Drops a converted tensor's source pages from the resident set when they belong to one of
  // the shards' mappings (SafetensorsFile::release_pages); anything else is left alone. The
  // loader calls it once a mapped tensor has been copied into another type, so a checkpoint
  // loaded as int8 / q4 (or from stored codes) holds one copy of the weights, not two.
  void release_pages(const void* p, size_t n) const;

  // A checkpoint whose tensors another format holds (a GGUF file seen with Hugging Face names,
  // checkpoint/gguf_hf.h): per name its shape, the stored type's name and bytes (for
  // progress and `inspect`), and how to produce it (a view of the mapping, or an owned tensor
  // made by undoing a converter's transform), called at each get(). `release` drops a
  // converted source's pages (release_pages). entry() and get_raw() know none of them.
  struct Provided {
    Shape shape;
    std::string dtype;
    uint64_t nbytes = 0;
    std::function<Result<Tensor>()> make;
  };
  static Checkpoint from_provided(std::string origin, std::map<std::string, Provided> tensors,
                                  std::function<bool(const void*, size_t)> release);

  // Replaces the progress callback (applies to get()).
  void set_progress_callback(CheckpointProgressFn fn);

 private:
  struct Loc {
    uint32_t file;
    uint32_t entry;
  };
  struct Progress;  // shared so that Checkpoint stays movable
  Result<Tensor> fetch(const std::string& name, const Shape* expected) const;
  void note_loaded(const std::string& name, uint64_t bytes) const;

  std::string dir_;
  std::vector<SafetensorsFile> files_;
  std::vector<std::string> file_paths_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, Loc> loc_;
  std::map<std::string, Provided> provided_;
  std::function<bool(const void*, size_t)> release_provided_;
  uint64_t total_bytes_ = 0;
  std::shared_ptr<Progress> progress_;
};

}  // namespace hypic
