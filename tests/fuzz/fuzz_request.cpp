// Request parsing and validation (src/api/request.h, server/engine_request.h) on arbitrary bodies.
//
// Input: byte 0 selects the endpoint (even: /v1/chat/completions, odd: /v1/completions); the
// rest is the HTTP body. The body goes through parse_request for that endpoint and through
// parse_segment_request (POST /v1/segments), and as an Anthropic Messages body through
// messages_to_chat and then the chat parser; an accepted request also goes through
// apply_auto_segments (both modes), whose result must still satisfy every rule. None may
// crash, throw or abort, whatever the
// bytes; an error must be a well-formed OpenAI error object (400 or 413) that serialises; an
// accepted request must satisfy every documented limit of RequestLimits. For an accepted
// request prompt_text() (ChatML) and generate_options() run too (build_prompt needs a
// tokenizer, which is too heavy to load per input; tokenisation is covered by
// fuzz_pretokenize).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/anthropic_request.h"
#include "api/auto_segments.h"
#include "api/request_tools.h"
#include "fuzz_common.h"
#include "server/engine_request.h"
#include "tokenizer/chat_template.h"

namespace {

using hypic::api::ApiError;
using hypic::api::ApiRequest;
using hypic::api::Endpoint;
using hypic::api::RequestLimits;
using hypic::api::Role;
using hypic::api::SegmentRequest;

// The error object as the HTTP layer sends it (http_util.cpp: invalid UTF-8 replaced).
void check_error(const ApiError& e) {
  FUZZ_CHECK(e.http_status == 400 || e.http_status == 413, "status %d", e.http_status);
  FUZZ_CHECK(!e.message.empty());
  FUZZ_CHECK(!e.type.empty());
  const std::string body =
      e.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  FUZZ_CHECK(body.size() > 2 && body.front() == '{' && body.back() == '}');
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool forced_call(const ApiRequest& r) {
  return r.tool_choice == hypic::api::ToolChoice::kRequired || r.tool_choice == hypic::api::ToolChoice::kNamed;
}

void check_request(const ApiRequest& r, Endpoint ep, const RequestLimits& lim) {
  FUZZ_CHECK(r.endpoint == ep);
  FUZZ_CHECK(r.max_tokens >= (r.echo ? 0 : 1) && r.max_tokens <= lim.max_tokens, "max_tokens %d", r.max_tokens);
  FUZZ_CHECK(r.logprobs >= -1 && r.logprobs <= hypic::api::kMaxTopLogprobs, "logprobs %d", r.logprobs);
  FUZZ_CHECK(!r.echo || ep == Endpoint::kCompletions, "echo on chat");
  FUZZ_CHECK(r.temperature >= 0.0 && r.temperature <= 2.0);
  FUZZ_CHECK(r.top_p > 0.0 && r.top_p <= 1.0);
  FUZZ_CHECK(int(r.stop.size()) <= lim.max_stop);
  for (const std::string& s : r.stop) FUZZ_CHECK(!s.empty() && s.size() <= lim.max_stop_bytes);
  FUZZ_CHECK(r.seam >= 0 && r.seam <= lim.max_seam);
  FUZZ_CHECK(r.cache_salt.size() <= lim.max_salt_bytes);
  FUZZ_CHECK(!r.include_usage || r.stream, "include_usage without stream");
  if (ep == Endpoint::kCompletions) {
    FUZZ_CHECK(r.prompt.empty() != r.prompt_tokens.empty(), "a prompt is text or token ids");
    for (int32_t id : r.prompt_tokens) FUZZ_CHECK(id >= 0);
    FUZZ_CHECK(r.messages.empty());
  } else {
    FUZZ_CHECK(r.prompt.empty() && r.prompt_tokens.empty());
    FUZZ_CHECK(!r.messages.empty() && int(r.messages.size()) <= lim.max_messages);
    FUZZ_CHECK(r.messages.back().role == Role::kUser || r.messages.back().role == Role::kTool);
    FUZZ_CHECK(r.tools.size() <= hypic::api::kMaxTools);
    for (const auto& t : r.tools) FUZZ_CHECK(!t.name.empty() && t.name.size() <= hypic::api::kMaxToolNameBytes);
    const bool forced = forced_call(r);
    FUZZ_CHECK(!forced || !r.tools.empty(), "a required tool call without tools");
    FUZZ_CHECK(!forced || r.response_format == hypic::api::ResponseFormat::kText, "a forced call with a JSON format");
    FUZZ_CHECK(r.segment_count() <= lim.max_segments);
    for (size_t i = 0; i < r.messages.size(); ++i) {
      const auto& m = r.messages[i];
      FUZZ_CHECK(!m.parts.empty() || !m.tool_calls.empty());
      FUZZ_CHECK(m.tool_calls.empty() || m.role == Role::kAssistant, "tool calls outside an assistant message");
      FUZZ_CHECK((m.role == Role::kTool) == !m.tool_call_id.empty(), "a tool message without its call id");
      const bool last = i + 1 == r.messages.size();
      int first = -1, final_seg = -1;
      for (int j = 0; j < int(m.parts.size()); ++j) {
        const auto& p = m.parts[size_t(j)];
        FUZZ_CHECK(p.segment || p.segment_id.empty(), "a reference that is not a segment");
        FUZZ_CHECK(p.segment_id.empty() || p.text.empty(), "a reference with text");
        FUZZ_CHECK(p.segment_id.size() <= lim.max_segment_id_bytes);
        if (!p.segment) continue;
        FUZZ_CHECK(last && m.role == Role::kUser, "a segment outside the last user message");
        FUZZ_CHECK(!p.text.empty() || !p.segment_id.empty(), "an empty segment");
        if (first < 0) first = j;
        final_seg = j;
      }
      for (int j = first + 1; first >= 0 && j < final_seg; ++j)
        FUZZ_CHECK(m.parts[size_t(j)].segment, "text between two segments");
    }
  }

  // Both tool formats (Qwen3's JSON calls, Qwen3.5's XML calls with the tools first).
  for (const char* name : {"chatml", "qwen3.5"}) {
    const hypic::ChatTemplate& chat = *hypic::chat_template_for(name).value();
    const std::string chatml = hypic::api::prompt_text(chat, r);
    if (ep == Endpoint::kCompletions) {
      FUZZ_CHECK(chatml == r.prompt);
    } else {
      FUZZ_CHECK(ends_with(chatml, "<|im_start|>assistant\n"));
      size_t text_bytes = 0;
      for (const auto& m : r.messages)
        for (const auto& p : m.parts) text_bytes += p.text.size();
      FUZZ_CHECK(chatml.size() >= text_bytes);
    }
    if (ep == Endpoint::kChat) {  // the grammar of every accepted request builds
      ApiRequest copy = r;
      const std::optional<ApiError> err = hypic::api::request_grammar(chat, &copy);
      FUZZ_CHECK(!err, "an accepted request whose grammar fails: %s", err ? err->message.c_str() : "");
      FUZZ_CHECK(bool(copy.grammar) == (copy.uses_tools() || copy.response_format != hypic::api::ResponseFormat::kText));
      FUZZ_CHECK(copy.grammar_trigger.empty() || (copy.tool_choice == hypic::api::ToolChoice::kAuto && copy.grammar));
    }
  }
  const hypic::GenerateOptions g = hypic::server::generate_options(r);
  FUZZ_CHECK(g.max_tokens == r.max_tokens);
  FUZZ_CHECK(g.stop == r.stop);
  // As floats (a top_p of 1e-300 becomes 0: the sampler then keeps the top token, as it
  // would for the tiny value).
  FUZZ_CHECK(g.sampling.temperature == float(r.temperature) && g.sampling.temperature <= 2.0f);
  FUZZ_CHECK(g.sampling.top_p == float(r.top_p) && g.sampling.top_p <= 1.0f);
  FUZZ_CHECK(g.sampling.seed == r.seed.value_or(0));
}

void check_segment_request(const SegmentRequest& s, const RequestLimits& lim) {
  FUZZ_CHECK(!s.text.empty());
  FUZZ_CHECK(s.cache_salt.size() <= lim.max_salt_bytes);
  FUZZ_CHECK(s.seam >= 0 && s.seam <= lim.max_seam);
  FUZZ_CHECK(!s.ttl_seconds || (*s.ttl_seconds >= 1 && *s.ttl_seconds <= lim.max_segment_ttl_s));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Endpoint ep = (data[0] & 1) ? Endpoint::kCompletions : Endpoint::kChat;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  static const RequestLimits lim{};

  hypic::api::AutoSegments both;
  both.separator = both.parts = true;
  const auto parse_and_cut = [&](std::string_view b, Endpoint e) {
    ApiRequest r;
    if (std::optional<ApiError> err = hypic::api::parse_request(b, e, lim, &r)) return check_error(*err);
    check_request(r, e, lim);
    if (std::optional<ApiError> err = hypic::api::apply_auto_segments(&r, both, lim)) return check_error(*err);
    FUZZ_CHECK(r.auto_segments_made >= 0 && r.auto_segments_made <= lim.max_segments);
    if (e == Endpoint::kChat) check_request(r, e, lim);  // the cut layout obeys every rule too
  };
  parse_and_cut(body, ep);
  auto chat = hypic::api::messages_to_chat(body, lim);
  if (auto* err = std::get_if<ApiError>(&chat)) check_error(*err);
  else parse_and_cut(std::get<std::string>(chat), Endpoint::kChat);

  SegmentRequest s;
  if (std::optional<ApiError> e = hypic::api::parse_segment_request(body, lim, &s)) {
    check_error(*e);
  } else {
    check_segment_request(s, lim);
    // The 404 for an unknown id echoes a prefix of it, cut at any byte.
    const ApiError nf = hypic::api::segment_not_found(s.text, "messages");
    FUZZ_CHECK(nf.http_status == 404);
    (void)nf.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return 0;
}
