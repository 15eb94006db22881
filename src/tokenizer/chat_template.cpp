#include "tokenizer/chat_template.h"

#include <mutex>

namespace hypic {

std::string ChatTemplate::conversation_open(std::string_view) const { return {}; }

std::string ChatTemplate::message_open(size_t index, std::string_view role) const {
  if (index != 0) return turn_open(role);
  return conversation_open(role) + first_turn_open(role);
}

std::string ChatTemplate::message_close(size_t index, std::string_view role) const {
  return index == 0 ? first_turn_close(role) : turn_close(role);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& msgs,
                                 bool add_generation_prompt) const {
  std::string out;
  if (msgs.empty()) out += conversation_open("");
  for (size_t i = 0; i < msgs.size(); ++i) {
    out += message_open(i, msgs[i].role);
    out += msgs[i].content;
    out += message_close(i, msgs[i].role);
  }
  if (add_generation_prompt) out += generation_prompt();
  return out;
}

namespace {

// The built-in templates, then those registered at run time.
struct Templates {
  std::mutex mu;
  std::vector<const ChatTemplate*> all;
};

Templates& templates() {
  static const ChatMl chat_ml;
  static const ChatMl qwen35(ChatMl::Tools::kQwen35);
  static const Bailing bailing;
  static const MiniMax minimax(MiniMax::Variant::kM1);
  static const MiniMax minimax_text_01(MiniMax::Variant::kText01);
  static const Kimi kimi;
  static const Ling3 ling3(/*thinking=*/true);
  static const Ling3 ling3_nothink(/*thinking=*/false);
  static Templates t{{}, {&chat_ml, &qwen35, &bailing, &minimax, &minimax_text_01, &kimi, &ling3, &ling3_nothink}};
  return t;
}

}  // namespace

Result<const ChatTemplate*> chat_template_for(std::string_view name) {
  Templates& ts = templates();
  std::lock_guard<std::mutex> lock(ts.mu);
  std::string names;
  for (const ChatTemplate* t : ts.all) {
    if (t->name() == name) return t;
    names += (names.empty() ? "" : ", ") + std::string(t->name());
  }
  return not_found("unknown chat template '" + std::string(name) + "' (known: " + names + ")");
}

Status register_chat_template(const ChatTemplate* t) {
  if (t == nullptr) return invalid_argument("register_chat_template: null template");
  Templates& ts = templates();
  std::lock_guard<std::mutex> lock(ts.mu);
  for (const ChatTemplate* u : ts.all)
    if (u->name() == t->name())
      return invalid_argument("chat template '" + std::string(t->name()) + "' is already registered");
  ts.all.push_back(t);
  return Status::ok();
}

}  // namespace hypic
