// Builds a GGUF file's Hugging Face view (checkpoint/gguf_hf.h; internal to checkpoint/): the
// metadata reads of one architecture's mapping and the tensor table it fills.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/gguf.h"
#include "core/status.h"

namespace hypic {

// Undoes a converter transform: `in` are the named GGUF tensors in F32 (outermost-first
// shapes), `out` the Hugging Face tensor, zeroed F32 of its shape.
using GgufUndo = std::function<void(const std::vector<Tensor>& in, Tensor& out)>;

class GgufHfMap {
 public:
  GgufHfMap(std::vector<std::shared_ptr<const GgufFile>> parts, std::string arch);

  const std::string& arch() const { return arch_; }
  const GgufFile& head() const { return *parts_.front(); }  // holds the metadata

  // `ARCH.key`: required ones fail naming the key; optional ones give nullopt when absent.
  Result<int64_t> need_int(std::string_view key) const;
  Result<double> need_float(std::string_view key) const;
  Result<std::optional<int64_t>> opt_int(std::string_view key) const;
  Result<std::optional<double>> opt_float(std::string_view key) const;
  Result<std::optional<bool>> opt_bool(std::string_view key) const;
  // An array of integers or booleans (as 0 / 1); nullopt when absent.
  Result<std::optional<std::vector<int64_t>>> opt_int_list(std::string_view key) const;
  // An array of numbers; nullopt when absent.
  Result<std::optional<std::vector<double>>> opt_float_list(std::string_view key) const;

  const GgufTensorInfo* find(std::string_view gguf) const;
  bool has(std::string_view gguf) const { return find(gguf) != nullptr; }
  // The tensor's shape (outermost first); an error naming it when absent.
  Result<Shape> shape(const std::string& gguf) const;

  // hf = gguf as stored, seen with `shape` (same elements; empty: the stored shape), or rows
  // [row0, row0 + rows) of its outermost dimension (rows >= 0; `shape` then describes them).
  // Float types are views of the mapping; quantized ones are dequantized to F32 at get().
  Status alias(const std::string& hf, const std::string& gguf, Shape shape = {}, int64_t row0 = 0,
               int64_t rows = -1);
  // hf (F32 of `shape`) = undo(gguf tensors in F32), computed at get().
  Status derive(const std::string& hf, const std::vector<std::string>& gguf, Shape shape, GgufUndo undo);

  // The finished view; the tensors' types are checked here (a type hypic does not read is
  // refused naming the tensor).
  Result<Checkpoint> finish(const std::string& origin);

 private:
  Result<const GgufTensorInfo*> need(const std::string& gguf) const;
  // The array at ARCH.key: nullptr when absent, an error when not an array.
  Result<const nlohmann::json*> opt_array(std::string_view key) const;
  std::vector<std::shared_ptr<const GgufFile>> parts_;
  std::string arch_;
  std::map<std::string, std::pair<size_t, const GgufTensorInfo*>> index_;  // name -> (part, info)
  std::map<std::string, Checkpoint::Provided> tensors_;
  std::set<std::string> used_;
};

// One architecture's mapping: fills `config` (a config.json equivalent) and the tensor table.
using GgufArchMapper = Status (*)(GgufHfMap& m, nlohmann::json& config);
// The mappings of gguf_qwen.cpp (qwen35, qwen35moe, qwen3next), gguf_kda_mla.cpp (kimi-linear,
// bailingmoe3) and gguf_minimax.cpp (minimax-01).
Status map_gguf_qwen(GgufHfMap& m, nlohmann::json& config);
Status map_gguf_kimi(GgufHfMap& m, nlohmann::json& config);
Status map_gguf_bailing3(GgufHfMap& m, nlohmann::json& config);
Status map_gguf_minimax(GgufHfMap& m, nlohmann::json& config);

// Experts stacked by the converter into ffn_{gate,up,down}_exps [E, out, in] under block prefix
// b: expert e's matrices as row ranges, named p + "experts.<e>." + gate / up / down.
Status alias_stacked_experts(GgufHfMap& m, int64_t E, int64_t H, int64_t I, const std::string& b,
                             const std::string& p, const char* gate, const char* up, const char* down);
// config's eos_token_id / bos_token_id / pad_token_id from the tokenizer.ggml.* ids written.
Status map_special_token_ids(const GgufHfMap& m, nlohmann::json& config);

// Helpers for the mappers: rows of heads in llama.cpp's tiled order (head t = j·nk + g) back
// to Hugging Face's grouped order (head h = g·r + j, r = n / nk), each head `d` rows of
// `width` floats; `n` heads starting at row `row0` of src and dst.
void untile_head_rows(const float* src, float* dst, int64_t row0, int64_t n, int64_t nk, int64_t d,
                      int64_t width);

}  // namespace hypic
