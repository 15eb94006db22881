#include "server/engine_request.h"

#include <algorithm>

#include "api/request_tools.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace hypic::server {

using namespace api;  // the server speaks the API's types

GenerateOptions generate_options(const ApiRequest& r) {
  GenerateOptions g;
  g.max_tokens = r.max_tokens;
  g.stop = r.stop;
  g.sampling.temperature = float(r.temperature);
  g.sampling.top_p = float(r.top_p);
  g.sampling.top_k = r.top_k;
  g.sampling.seed = r.seed.value_or(0);
  g.logprobs = r.logprobs;
  g.grammar = r.grammar;
  g.grammar_trigger = r.grammar_trigger;
  // A reply that starts inside a reasoning block: calls count once the block is closed.
  if (r.thinking && r.reasoning && !g.grammar_trigger.empty()) g.grammar_gate = r.reasoning->close;
  return g;
}

std::optional<ApiError> build_prompt(const Tokenizer& tok, const ChatTemplate& chat,
                                     const ApiRequest& r, int64_t max_prompt_tokens,
                                     PromptParts* out, const SegmentResolver& resolve) {
  *out = PromptParts{};
  if (r.endpoint == Endpoint::kCompletions) {
    // Completions prompts are raw text (special-token text in them is parsed, as vLLM does)
    // or token ids, which must name tokens of this vocabulary.
    if (!r.prompt_tokens.empty()) {
      for (int32_t id : r.prompt_tokens)
        if (id >= tok.vocab_size())
          return bad_request("token id " + std::to_string(id) + " in 'prompt' is outside this model's vocabulary (0 to " +
                                 std::to_string(tok.vocab_size() - 1) + ")", "prompt", "invalid_value");
      out->suffix = r.prompt_tokens;
    } else {
      for (const std::string& s : r.prompt_segments) out->segments.push_back(tok.encode(s, /*parse_special=*/true));
      out->suffix = tok.encode(r.prompt, /*parse_special=*/true);
    }
    if (out->suffix.empty()) return bad_request("'prompt' tokenises to nothing", "prompt", "invalid_value");
  } else {
    // Template markers are special tokens; message text never is (no injection of a
    // marker through content).
    auto special = [&](const std::string& s, std::vector<int32_t>* ids) {
      tok.encode_append(s, *ids, /*parse_special=*/true);
    };
    auto plain = [&](const std::string& s, std::vector<int32_t>* ids) {
      tok.encode_append(s, *ids, /*parse_special=*/false);
    };
    std::vector<Message> turns;  // tools, calls and results written in the model's format
    if (auto e = template_messages(chat, r, &turns)) return e;
    std::vector<int32_t>* cur = &out->prefix;
    for (size_t i = 0; i < turns.size(); ++i) {
      const Message& m = turns[i];
      const bool last = i + 1 == turns.size();
      const bool has_segment = std::any_of(m.parts.begin(), m.parts.end(), [](const ContentPart& p) { return p.segment; });
      if (last && out->segments.empty() && !has_segment) cur = &out->suffix;  // no segments: the last turn is the suffix
      special(chat.message_open(i, role_name(m.role)), cur);
      // Consecutive plain parts are tokenised as one text, so that splitting a string into
      // parts does not change its tokens.
      std::string run;
      for (size_t j = 0; j < m.parts.size(); ++j) {
        const ContentPart& p = m.parts[j];
        if (p.segment) {  // in one message only: the last user turn, or the tools of the system turn
          plain(run, cur);
          run.clear();
          if (p.segment_id.empty()) {
            out->segments.push_back(tok.encode(p.text, /*parse_special=*/false));
          } else {
            const std::string param = "messages[" + std::to_string(r.messages.size() - 1) + "].content[" + std::to_string(j) + "].segment_id";
            std::vector<int32_t> ids;
            std::optional<ApiError> e = resolve ? resolve(p.segment_id, &ids) : segment_not_found(p.segment_id);
            if (!e && ids.empty()) e = segment_not_found(p.segment_id);
            if (e) {
              if (e->param.empty()) e->param = param;
              return e;
            }
            out->segments.push_back(std::move(ids));
          }
          cur = &out->suffix;
        } else {
          run += p.text;
        }
      }
      plain(run, cur);
      special(chat.message_close(i, role_name(m.role)), cur);
      // A message ends: a checkpoint (prefix mode; after a composed head, in the suffix).
      std::vector<size_t>& breaks = cur == &out->prefix ? out->prefix_breaks : out->suffix_breaks;
      if (!cur->empty() && (breaks.empty() || breaks.back() < cur->size())) breaks.push_back(cur->size());
    }
    special(chat.generation_prompt(), cur);
    if (r.reasoning) special(r.thinking ? r.reasoning->prompt_on : r.reasoning->prompt_off, cur);
  }
  const int64_t n = out->total_tokens();
  if (n > max_prompt_tokens) {
    ApiError e = bad_request("the prompt has " + std::to_string(n) + " tokens; with max_tokens the request needs more than the model's context allows (at most " +
                                 std::to_string(max_prompt_tokens) + " prompt tokens); shorten the prompt or lower max_tokens",
                             r.endpoint == Endpoint::kChat ? "messages" : "prompt", "context_length_exceeded");
    return e;
  }
  return std::nullopt;
}

}  // namespace hypic::server
