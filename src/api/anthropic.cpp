#include "api/anthropic.h"

#include "api/http_util.h"

namespace hypic::api {

using nlohmann::json;

namespace {

const char* error_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status < 500 ? "invalid_request_error" : "api_error";  // Anthropic: "other 4XX" too
  }
}

json error_json(int status, const std::string& message) {
  return json{{"type", "error"}, {"error", {{"type", error_type(status)}, {"message", message}}}};
}

std::string stop_reason(const ChoiceResult& c) {
  if (c.finish_reason == "length") return "max_tokens";
  if (c.finish_reason == "tool_calls") return "tool_use";
  return !c.stop_sequence.empty() ? "stop_sequence" : "end_turn";
}

json stop_sequence(const ChoiceResult& c) { return c.stop_sequence.empty() ? json(nullptr) : json(c.stop_sequence); }

// Anthropic's usage: input tokens not read from or written to a cache, and those that were.
json usage_of(const Usage& u) {
  const int64_t read = u.reused_tokens, written = u.cached_new_tokens;
  return json{{"input_tokens", std::max<int64_t>(0, u.prompt_tokens - read - written)},
              {"output_tokens", u.completion_tokens},
              {"cache_creation_input_tokens", written},
              {"cache_read_input_tokens", read},
              {"hypic", usage_json(u)["hypic"]}};
}

// A tool call of the reply as a tool_use block.
json tool_use(const ToolCall& call) {
  json input = json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  return json{{"type", "tool_use"}, {"id", call.id}, {"name", call.name},
              {"input", input.is_object() ? input : json::object()}};
}

// The message of a finished reply (`result` its one choice and usage), or the one that
// message_start opens (null: no stop reason, no usage yet).
json message_json(const ReplyMeta& m, const CompletionResult* result) {
  json content = json::array();
  const ChoiceResult none;
  const ChoiceResult& c = result ? result->choices.front() : none;
  // hypic does not sign its reasoning: the signature is empty (clients send it back as it came).
  if (!c.reasoning.empty()) content.push_back(json{{"type", "thinking"}, {"thinking", c.reasoning}, {"signature", ""}});
  if (!c.text.empty() || c.tool_calls.empty()) content.push_back(json{{"type", "text"}, {"text", c.text}});  // a message has a block
  for (const ToolCall& call : c.tool_calls) content.push_back(tool_use(call));
  return json{{"id", m.id}, {"type", "message"}, {"role", "assistant"}, {"model", m.model}, {"content", content},
              {"stop_reason", result ? json(stop_reason(c)) : json(nullptr)},
              {"stop_sequence", stop_sequence(c)},
              {"usage", result ? usage_of(result->usage) : json{{"input_tokens", 0}, {"output_tokens", 0}}}};
}

std::string sse(const char* name, const json& data) { return std::string("event: ") + name + "\ndata: " + dump(data) + "\n\n"; }

class MessagesStream final : public TicketBodyStream {
 public:
  MessagesStream(std::shared_ptr<Ticket> t, ReplyMeta m, ReplyDone done)
      : TicketBodyStream(std::move(t), std::move(done)), m_(std::move(m)) {}

 private:
  void start(std::string* out) override {
    json msg = message_json(m_, nullptr);
    msg["content"] = json::array();  // the blocks follow, each from its content_block_start
    *out += sse("message_start", json{{"type", "message_start"}, {"message", std::move(msg)}});
  }
  // The reply's reasoning: a thinking block, before any other.
  void reasoning(const std::string& text, int, std::string* out) override {
    if (!thinking_open_) {
      thinking_open_ = true;
      *out += sse("content_block_start", json{{"type", "content_block_start"}, {"index", index_},
                                              {"content_block", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}}});
      if (index_ == 0) *out += sse("ping", json{{"type", "ping"}});
    }
    *out += sse("content_block_delta", json{{"type", "content_block_delta"}, {"index", index_},
                                            {"delta", {{"type", "thinking_delta"}, {"thinking", text}}}});
  }
  void piece(const std::string& text, json, int, std::string* out) override {
    open_text(out);
    *out += sse("content_block_delta", json{{"type", "content_block_delta"}, {"index", index_},
                                            {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }
  // A tool_use block of its own: start (input {}), the input as one input_json_delta, stop.
  void tool_call(const ToolCall& call, int, int, std::string* out) override {
    close_block(out);
    json start = tool_use(call);
    start["input"] = json::object();
    *out += sse("content_block_start", json{{"type", "content_block_start"}, {"index", index_}, {"content_block", start}});
    *out += sse("content_block_delta", json{{"type", "content_block_delta"}, {"index", index_},
                                            {"delta", {{"type", "input_json_delta"}, {"partial_json", call.arguments}}}});
    *out += sse("content_block_stop", json{{"type", "content_block_stop"}, {"index", index_}});
    ++index_;
    blocks_ = true;
  }
  void open_text(std::string* out) {
    if (text_open_) return;
    close_block(out);  // the thinking block
    text_open_ = true;
    *out += sse("content_block_start", json{{"type", "content_block_start"}, {"index", index_},
                                            {"content_block", {{"type", "text"}, {"text", ""}}}});
    if (index_ == 0) *out += sse("ping", json{{"type", "ping"}});
  }
  void close_block(std::string* out) {
    if (!text_open_ && !thinking_open_) return;
    if (thinking_open_)
      *out += sse("content_block_delta", json{{"type", "content_block_delta"}, {"index", index_},
                                              {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
    *out += sse("content_block_stop", json{{"type", "content_block_stop"}, {"index", index_}});
    text_open_ = thinking_open_ = false;
    ++index_;
    blocks_ = true;
  }
  void finish(const Outcome& o, std::string* out) override {
    if (o.completion) {
      const ChoiceResult& c = o.completion->choices.front();
      if (!blocks_) open_text(out);  // a reply has at least one block
      close_block(out);
      *out += sse("message_delta", json{{"type", "message_delta"},
                                        {"delta", {{"stop_reason", stop_reason(c)}, {"stop_sequence", stop_sequence(c)}}},
                                        {"usage", usage_of(o.completion->usage)}});
    }
    if (o.error) {
      *out += sse("error", error_json(o.error->http_status, o.error->message));
      end()(o.error->http_status, nullptr, o.error->code);
      return;
    }
    *out += sse("message_stop", json{{"type", "message_stop"}});
    end()(200, o.completion ? usage_json(o.completion->usage) : json(nullptr), "");
  }

  ReplyMeta m_;
  int index_ = 0;           // the block being written, or the next one
  bool text_open_ = false;  // a text block is open at index_
  bool thinking_open_ = false;  // a thinking block is open at index_
  bool blocks_ = false;     // a block has been closed
};

}  // namespace

HttpResponse anthropic_error_reply(const ApiError& e) { return json_reply(error_json(e.http_status, e.message), e.http_status); }

void reply_messages(Reply reply, std::shared_ptr<Ticket> ticket, ReplyMeta m, ReplyDone done) {
  if (!m.stream) {
    return when_finished(std::move(ticket), [reply, m, done](std::string, Outcome o) {
      if (o.error) {
        done(o.error->http_status, nullptr, o.error->code);
        return reply(anthropic_error_reply(*o.error));
      }
      json body = message_json(m, &*o.completion);
      done(200, usage_json(o.completion->usage), "");
      reply(json_reply(body));
    });
  }
  reply(sse_response(std::make_shared<MessagesStream>(std::move(ticket), std::move(m), std::move(done))));
}

}  // namespace hypic::api
