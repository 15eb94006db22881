// Model architectures as data: one file per family in model/arch/ says how to read its
// config.json (keys, transformers' defaults, the layer list as (token mixer, channel mixer)
// pairs) and how to read its checkpoint (tensor names and layouts → the mixers' weights).
//
// A registry maps config.json's model_type to the architecture; `architectures` (the model
// class names) is checked against it. The built-in families are listed in arch/registry.cpp;
// register_architecture() adds another at run time (the tests register one of their own).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "model/config.h"
#include "model/weights.h"

namespace hypic {

class WeightReader;

class Architecture {
 public:
  virtual ~Architecture() = default;
  // Display name ("Qwen3-Next") and the config.json model_type values this family reads.
  virtual const char* name() const = 0;
  virtual std::vector<std::string> model_types() const = 0;
  // Whether `cls`, an entry of config.json's `architectures`, is one of this family's model
  // classes ("Qwen3NextForCausalLM").
  virtual bool has_class(const std::string& cls) const = 0;
  // The name of the chat template (tokenizer/chat_template.h: "chatml") of a model of this
  // family with config `c` (a family may have several: MiniMax-M1 and Text-01).
  virtual const char* chat_template(const ModelConfig& c) const = 0;

  // Fills c from config.json (root: the whole object; c->model_type is set): the family's
  // keys with their defaults, c->layers, c->weight_prefix. ModelConfig::validate() runs after.
  virtual Status parse_config(const nlohmann::json& root, const std::string& source,
                              ModelConfig* c) const = 0;
  // Checks that hold for this family only (after the generic validate()).
  virtual Status validate(const ModelConfig& c) const { return Status::ok(); }

  // The token embedding's names under the weight prefix, the first one present is taken
  // ("embed_tokens.weight"; Bailing's released checkpoints: "word_embeddings.weight").
  virtual std::vector<std::string> embedding_names() const { return {"embed_tokens.weight"}; }

  // Loads decoder layer `layer`'s weights under `prefix` ("model.layers.3."): norms, the
  // token mixer and channel mixer.
  virtual Status load_layer(const WeightReader& rd, const ModelConfig& c, int layer,
                            const std::string& prefix,  DecoderLayer* out) const = 0;
};

// The architecture whose model_types() has `model_type`; null if none.
const Architecture* find_architecture(const std::string& model_type);
// Every registered architecture (built-in first).
std::vector<const Architecture*> architectures();
// Adds an architecture (it must outlive every use; a static object). Error when one of its
// model_types is taken.
Status register_architecture(const Architecture* a);

}  // namespace hypic
