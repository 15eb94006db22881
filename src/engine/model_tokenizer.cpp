#include "engine/model_tokenizer.h"

#include <filesystem>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint/gguf.h"
#include "checkpoint/gguf_hf.h"
#include "core/log.h"
#include "core/text.h"
#include "engine/prompt.h"
#include "tokenizer/gguf_vocab.h"

namespace hypic {

Result<Tokenizer> load_model_tokenizer(const std::string& model) {
  if (!is_gguf_path(model)) return Tokenizer::load(model);
  HYPIC_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(model));  // a split's first part holds it
  return tokenizer_from_gguf(f.metadata(), model);
}

std::string compare_chat_template(const ChatTemplate& t, std::string_view jinja) {
  std::string rendered = t.generation_prompt();
  for (const char* role : {"system", "user", "assistant", "tool"})
    rendered += t.turn_open(role) + t.turn_close(role);
  static const std::regex kMarker(R"(<\|[^|<>]{1,40}\|>|</?[A-Za-z_]{1,24}>|\[[A-Z_]{2,12}\])");
  std::set<std::string> markers;
  for (auto it = std::sregex_iterator(rendered.begin(), rendered.end(), kMarker); it != std::sregex_iterator(); ++it)
    markers.insert(it->str());
  std::string missing, found;
  for (const std::string& m : markers)
    (jinja.find(m) == std::string_view::npos ? missing : found) += (m + " ");
  const std::string name(t.name());
  if (missing.empty())
    return "the file's chat template holds every marker of hypic's '" + name + "' format (" +
           (found.empty() ? std::string("none") : found.substr(0, found.size() - 1)) + ")";
  return "the file's chat template differs from hypic's '" + name + "' format: it lacks " +
         missing.substr(0, missing.size() - 1) + "; prompts are rendered with hypic's '" + name + "'";
}

void log_chat_format(const std::string& model, const ModelConfig& cfg) {
  if (!is_gguf_path(model)) return;
  const ChatTemplate& t = model_chat_template(cfg);
  auto f = GgufFile::open(model);
  auto jinja = f.is_ok() ? f->meta_string("tokenizer.chat_template") : Result<std::optional<std::string>>(f.status());
  if (!jinja.is_ok() || !*jinja) {
    HYPIC_LOG_INFO("%s: chat format '%s' (by architecture); the file has no tokenizer.chat_template",
                   model.c_str(), std::string(t.name()).c_str());
    return;
  }
  HYPIC_LOG_INFO("%s: chat format '%s' (by architecture); %s", model.c_str(), std::string(t.name()).c_str(),
                 compare_chat_template(t, **jinja).c_str());
}

std::optional<std::string> checkpoint_chat_template(const std::string& model) {
  if (is_gguf_path(model)) {
    auto f = GgufFile::open(model);
    if (!f.is_ok()) return std::nullopt;
    auto jinja = f->meta_string("tokenizer.chat_template");
    return jinja.is_ok() ? *jinja : std::nullopt;
  }
  const std::filesystem::path dir(model);
  if (auto t = read_text_file(dir / "chat_template.jinja")) return t;
  const auto cfg = read_text_file(dir / "tokenizer_config.json");
  if (!cfg) return std::nullopt;
  const auto j = nlohmann::json::parse(*cfg, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  const auto t = j.find("chat_template");
  if (t == j.end()) return std::nullopt;
  if (t->is_string()) return t->get<std::string>();
  if (!t->is_array()) return std::nullopt;
  for (const auto& e : *t)  // [{"name": ..., "template": ...}]
    if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string())
      return e["template"].get<std::string>();
  return std::nullopt;
}

Result<const ReasoningFormat*> model_reasoning(const std::string& model, const ModelConfig& cfg, std::string_view mode) {
  const ChatTemplate& t = model_chat_template(cfg);
  if (mode == "off") return static_cast<const ReasoningFormat*>(nullptr);
  if (mode == "on") {
    if (!t.reasoning_format())
      return invalid_argument("--reasoning on: hypic does not write reasoning for this model's chat format ('" +
                              std::string(t.name()) + "') yet; use --reasoning off");
    return t.reasoning_format();
  }
  if (mode != "auto") return invalid_argument("--reasoning must be auto, on or off (got '" + std::string(mode) + "')");
  const auto jinja = checkpoint_chat_template(model);
  const bool thinks = jinja && jinja->find("<think>") != std::string::npos;
  return thinks ? t.reasoning_format() : nullptr;
}

}  // namespace hypic
