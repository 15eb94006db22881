#include "checkpoint/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_set>

#include "checkpoint/stored_quant.h"
#include "core/json_bounded.h"
#include "core/log.h"

namespace hypic {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

std::string gib(uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(uint64_t(1) << 30));
  return buf;
}

// Reads the index's weight_map (tensor name -> shard file name).
Result<std::map<std::string, std::string>> read_index(const std::string& index_path) {
  std::ifstream in(index_path, std::ios::binary);
  if (!in) return io_error("cannot read checkpoint index '" + index_path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  json j;
  try {
    j = json::parse(ss.str());
  } catch (const json::exception& e) {
    return corrupt("checkpoint index '" + index_path + "' is not valid JSON (" + e.what() + ")");
  }
  if (json_nested_deeper(j, kMaxDumpDepth))
    return corrupt("checkpoint index '" + index_path + "' nests values more than " + std::to_string(kMaxDumpDepth) +
                   " levels deep (damaged?)");
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return corrupt("checkpoint index '" + index_path + "' has no 'weight_map' object");
  std::map<std::string, std::string> r;
  for (const auto& [name, v] : j["weight_map"].items()) {
    if (!v.is_string() || v.get<std::string>().empty())
      return corrupt("checkpoint index '" + index_path + "': weight_map entry for tensor '" +
                     name + "' is not a file name");
    const std::string file = v.get<std::string>();
    if (fs::path(file).is_absolute())
      return corrupt("checkpoint index '" + index_path + "': tensor '" + name +
                     "' maps to absolute path '" + file + "'; shard names must be relative");
    r.emplace(name, file);
  }
  if (r.empty()) return corrupt("checkpoint index '" + index_path + "' lists no tensors");
  return r;
}

}  // namespace

struct Checkpoint::Progress {
  std::mutex mu;
  CheckpointProgressFn fn;
  std::unordered_set<std::string> loaded;
  uint64_t done_bytes = 0;
};

Result<Checkpoint> Checkpoint::open(const std::string& path, CheckpointProgressFn progress) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st))
    return not_found("model path '" + path + "' does not exist");

  Checkpoint ck;
  ck.progress_ = std::make_shared<Progress>();
  ck.progress_->fn = progress;

  std::vector<std::string> shard_paths;
  std::map<std::string, std::string> weight_map;  // from the index, if any
  std::string index_path;
  if (fs::is_regular_file(st)) {
    if (fs::path(path).extension() != ".safetensors")
      return invalid_argument("'" + path + "' is neither a model directory nor a .safetensors "
                              "file");
    ck.dir_ = fs::path(path).has_parent_path() ? fs::path(path).parent_path().string() : ".";
    shard_paths.push_back(path);
  } else if (fs::is_directory(st)) {
    ck.dir_ = path;
    const fs::path dir(path);
    if (fs::exists(dir / kIndexName, ec)) {
      index_path = (dir / kIndexName).string();
      HYPIC_ASSIGN_OR_RETURN(weight_map, read_index(index_path));
      std::set<std::string> unique;
      for (const auto& [name, file] : weight_map) {
        if (!unique.insert(file).second) continue;
        const fs::path p = dir / file;
        if (!fs::is_regular_file(p, ec))
          return not_found("shard '" + p.string() + "' (holding tensor '" + name +
                           "', listed in '" + index_path + "') does not exist; download "
                           "every shard of the checkpoint");
      }
      for (const std::string& f : unique) shard_paths.push_back((dir / f).string());
    } else if (fs::is_regular_file(dir / kSingleName, ec)) {
      shard_paths.push_back((dir / kSingleName).string());
    } else {
      for (const fs::directory_entry& de : fs::directory_iterator(dir, ec))
        if (de.is_regular_file() && de.path().extension() == ".safetensors")
          shard_paths.push_back(de.path().string());
      if (ec) return io_error("cannot list directory '" + path + "': " + ec.message());
      std::sort(shard_paths.begin(), shard_paths.end());
    }
    if (shard_paths.empty())
      return not_found("no weights in '" + path + "': expected " + kSingleName + ", " +
                       kIndexName + " or *.safetensors files");
  } else {
    return invalid_argument("'" + path + "' is neither a model directory nor a file");
  }

  // Open and validate every shard.
  uint64_t total_file_bytes = 0;
  for (const std::string& p : shard_paths) total_file_bytes += fs::file_size(p, ec);
  const bool large = total_file_bytes > kLargeBytes;
  if (large)
    HYPIC_LOG_INFO("checkpoint: opening %zu shard(s), %s, in %s", shard_paths.size(),
                   gib(total_file_bytes).c_str(), ck.dir_.c_str());
  uint64_t opened_bytes = 0;
  int last_logged_pct = -1;
  for (size_t i = 0; i < shard_paths.size(); ++i) {
    HYPIC_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(shard_paths[i]));
    opened_bytes += f.file_size();
    const int pct = total_file_bytes ? int(100.0 * double(opened_bytes) / double(total_file_bytes))
                                     : 100;
    if (large && (pct / 10 > last_logged_pct / 10 || i + 1 == shard_paths.size())) {
      HYPIC_LOG_INFO("checkpoint: validated %zu/%zu shards, %s of %s (%d%%)", i + 1,
                     shard_paths.size(), gib(opened_bytes).c_str(),
                     gib(total_file_bytes).c_str(), pct);
      last_logged_pct = pct;
    }
    if (progress) {
      CheckpointProgress pr;
      pr.stage = CheckpointProgress::Stage::kOpenShard;
      pr.item = shard_paths[i];
      pr.done_bytes = opened_bytes;
      pr.total_bytes = std::max(total_file_bytes, opened_bytes);
      pr.done_items = i + 1;
      pr.total_items = shard_paths.size();
      progress(pr);
    }
    ck.files_.push_back(std::move(f));
    ck.file_paths_.push_back(shard_paths[i]);
  }

  // Name -> location; a name in two shards is an error whether or not there is an index.
  for (uint32_t fi = 0; fi < ck.files_.size(); ++fi) {
    const auto& entries = ck.files_[fi].entries();
    for (uint32_t ei = 0; ei < entries.size(); ++ei) {
      auto [it, inserted] = ck.loc_.emplace(entries[ei].name, Loc{fi, ei});
      if (!inserted)
        return corrupt("tensor '" + entries[ei].name + "' appears in both '" +
                       ck.file_paths_[it->second.file] + "' and '" + ck.file_paths_[fi] +
                       "'; remove the stale file from the model directory");
    }
  }
  if (!weight_map.empty()) {
    for (const auto& [name, file] : weight_map) {
      const std::string want = (fs::path(ck.dir_) / file).string();
      auto it = ck.loc_.find(name);
      if (it == ck.loc_.end())
        return corrupt("'" + index_path + "' places tensor '" + name + "' in '" + want +
                       "', but that file has no such tensor; the shard is incomplete or "
                       "from another checkpoint (download it again)");
      if (ck.file_paths_[it->second.file] != want)
        return corrupt("'" + index_path + "' places tensor '" + name + "' in '" + want +
                       "', but it is in '" + ck.file_paths_[it->second.file] + "'");
    }
    size_t dropped = 0;
    for (auto it = ck.loc_.begin(); it != ck.loc_.end();) {
      if (weight_map.count(it->first)) {
        ++it;
      } else {
        it = ck.loc_.erase(it);
        ++dropped;
      }
    }
    if (dropped)
      HYPIC_LOG_DEBUG("checkpoint: ignoring %zu tensor(s) in shards but not in %s", dropped,
                      index_path.c_str());
  }

  ck.names_.reserve(ck.loc_.size());
  for (const auto& [name, loc] : ck.loc_) {
    ck.names_.push_back(name);
    ck.total_bytes_ += ck.files_[loc.file].entries()[loc.entry].nbytes();
  }
  std::sort(ck.names_.begin(), ck.names_.end());
  return ck;
}

const SafetensorsEntry* Checkpoint::entry(const std::string& name) const {
  auto it = loc_.find(name);
  return it == loc_.end() ? nullptr : &files_[it->second.file].entries()[it->second.entry];
}

const std::string* Checkpoint::file_of(const std::string& name) const {
  auto it = loc_.find(name);
  return it == loc_.end() ? nullptr : &file_paths_[it->second.file];
}

void Checkpoint::set_progress_callback(CheckpointProgressFn fn) {
  std::lock_guard<std::mutex> lock(progress_->mu);
  progress_->fn = std::move(fn);
}

void Checkpoint::note_loaded(const std::string& name, uint64_t bytes) const {
  std::lock_guard<std::mutex> lock(progress_->mu);
  if (!progress_->loaded.insert(name).second) return;
  progress_->done_bytes += bytes;
  if (!progress_->fn) return;
  CheckpointProgress pr;
  pr.stage = CheckpointProgress::Stage::kLoadTensor;
  pr.item = name;
  pr.done_bytes = progress_->done_bytes;
  pr.total_bytes = total_bytes_;
  pr.done_items = progress_->loaded.size();
  pr.total_items = names_.size();
  progress_->fn(pr);  // under the lock, so that reports arrive in order
}

Checkpoint Checkpoint::from_provided(std::string origin, std::map<std::string, Provided> tensors,
                                     std::function<bool(const void*, size_t)> release) {
  Checkpoint ck;
  ck.dir_ = std::move(origin);
  ck.progress_ = std::make_shared<Progress>();
  for (const auto& [name, t] : tensors) {
    ck.names_.push_back(name);  // sorted: the map's order
    ck.total_bytes_ += t.nbytes;
  }
  ck.provided_ = std::move(tensors);
  ck.release_provided_ = std::move(release);
  return ck;
}

Result<Tensor> Checkpoint::fetch(const std::string& name, const Shape* expected) const {
  if (auto p = provided_.find(name); p != provided_.end()) {
    if (expected && p->second.shape != *expected)
      return invalid_argument("tensor '" + name + "' in '" + dir_ + "' has shape " +
                              shape_str(p->second.shape) + ", its metadata implies " +
                              shape_str(*expected) + "; the file's header does not describe "
                              "its tensors");
    HYPIC_ASSIGN_OR_RETURN(Tensor t, p->second.make());
    note_loaded(name, p->second.nbytes);
    return t;
  }
  auto it = loc_.find(name);
  if (it == loc_.end())
    return not_found("tensor '" + name + "' is not in the checkpoint at '" + dir_ + "' (" +
                     std::to_string(names_.size()) + " tensors); the weights do not match "
                     "config.json's architecture, or the checkpoint is incomplete");
  const SafetensorsFile& f = files_[it->second.file];
  const SafetensorsEntry& e = f.entries()[it->second.entry];
  if (!e.float_dtype && stored_quant_dtype(e.dtype)) {  // hypic's int8 / q4, or FP8
    HYPIC_ASSIGN_OR_RETURN(Tensor q, read_stored_quantized(*this, name, e, expected));
    note_loaded(name, e.nbytes());
    return q;
  }
  if (expected && e.shape != *expected)
    return invalid_argument("tensor '" + name + "' in file '" + f.path() + "' has shape " +
                            shape_str(e.shape) + ", config implies " + shape_str(*expected) +
                            "; config.json does not describe these weights");
  HYPIC_ASSIGN_OR_RETURN(Tensor t, f.tensor(name));
  note_loaded(name, e.nbytes());
  return t;
}

void Checkpoint::release_pages(const void* p, size_t n) const {
  if (release_provided_ && release_provided_(p, n)) return;
  for (const SafetensorsFile& f : files_)
    if (f.release_pages(p, n)) return;
}

Result<Tensor> Checkpoint::get(const std::string& name, const Shape& expected) const {
  return fetch(name, &expected);
}

Result<Tensor> Checkpoint::get_unchecked(const std::string& name) const {
  return fetch(name, nullptr);
}

Result<RawTensor> Checkpoint::get_raw(const std::string& name) const {
  auto it = loc_.find(name);
  if (it == loc_.end())
    return not_found("tensor '" + name + "' is not in the checkpoint at '" + dir_ + "'");
  return files_[it->second.file].raw(name);
}

}  // namespace hypic
