#include "api/anthropic.h"

#include "api/http_util.h"

namespace hypic::server {

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

std::string stop_reason(const json& result) {
  if (result.value("finish_reason", "") == "length") return "max_tokens";
  if (result.value("finish_reason", "") == "tool_calls") return "tool_use";
  return result.contains("stop_sequence") ? "stop_sequence" : "end_turn";
}

// Anthropic's usage from the chat usage: input tokens not read from or written to a cache,
// and those that were.
json usage_of(const json& u) {
  const int64_t prompt = u.value("prompt_tokens", int64_t(0));
  const int64_t read = u.contains("prompt_tokens_details") ? u["prompt_tokens_details"].value("cached_tokens", int64_t(0)) : 0;
  const int64_t written = u.contains("hypic") ? u["hypic"].value("cached_new_tokens", int64_t(0)) : 0;
  return json{{"input_tokens", std::max<int64_t>(0, prompt - read - written)},
              {"output_tokens", u.value("completion_tokens", int64_t(0))},
              {"cache_creation_input_tokens", written},
              {"cache_read_input_tokens", read},
              {"hypic", u.contains("hypic") ? u["hypic"] : json(nullptr)}};
}

// A tool call of the reply ({"id", "name", "arguments"}) as a tool_use block.
json tool_use(const json& call) {
  json input = json::parse(call.value("arguments", "{}"), nullptr, /*allow_exceptions=*/false);
  return json{{"type", "tool_use"}, {"id", call["id"]}, {"name", call["name"]},
              {"input", input.is_object() ? input : json::object()}};
}

json message_json(const ReplyMeta& m, const std::string& text, const json& result) {
  json content = json::array();
  const bool calls = result.contains("tool_calls") && !result["tool_calls"].empty();
  if (!text.empty() || !calls) content.push_back(json{{"type", "text"}, {"text", text}});  // a message has a block
  if (calls)
    for (const json& c : result["tool_calls"]) content.push_back(tool_use(c));
  return json{{"id", m.id}, {"type", "message"}, {"role", "assistant"}, {"model", m.model}, {"content", content},
              {"stop_reason", result.is_null() ? json(nullptr) : json(stop_reason(result))},
              {"stop_sequence", result.contains("stop_sequence") ? result["stop_sequence"] : json(nullptr)},
              {"usage", result.contains("usage") ? usage_of(result["usage"])
                                                 : json{{"input_tokens", 0}, {"output_tokens", 0}}}};
}

std::string sse(const char* name, const json& data) { return std::string("event: ") + name + "\ndata: " + dump(data) + "\n\n"; }

class MessagesStream final : public TicketBodyStream {
 public:
  MessagesStream(std::shared_ptr<Ticket> t, ReplyMeta m, ReplyDone done)
      : TicketBodyStream(std::move(t), std::move(done)), m_(std::move(m)) {}

 private:
  void start(std::string* out) override {
    json msg = message_json(m_, "", nullptr);
    msg["content"] = json::array();  // the blocks follow, each from its content_block_start
    *out += sse("message_start", json{{"type", "message_start"}, {"message", std::move(msg)}});
  }
  void piece(const std::string& text, json, int, std::string* out) override {
    open_text(out);
    *out += sse("content_block_delta", json{{"type", "content_block_delta"}, {"index", index_},
                                            {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }
  // A tool_use block of its own: start (input {}), the input as one input_json_delta, stop.
  void tool_call(const json& call, int, std::string* out) override {
    close_block(out);
    json start = tool_use(call);
    start["input"] = json::object();
    *out += sse("content_block_start", json{{"type", "content_block_start"}, {"index", index_}, {"content_block", start}});
    *out += sse("content_block_delta", json{{"type", "content_block_delta"}, {"index", index_},
                                            {"delta", {{"type", "input_json_delta"}, {"partial_json", call["arguments"]}}}});
    *out += sse("content_block_stop", json{{"type", "content_block_stop"}, {"index", index_}});
    ++index_;
    blocks_ = true;
  }
  void open_text(std::string* out) {
    if (text_open_) return;
    text_open_ = true;
    *out += sse("content_block_start", json{{"type", "content_block_start"}, {"index", index_},
                                            {"content_block", {{"type", "text"}, {"text", ""}}}});
    if (index_ == 0) *out += sse("ping", json{{"type", "ping"}});
  }
  void close_block(std::string* out) {
    if (!text_open_) return;
    *out += sse("content_block_stop", json{{"type", "content_block_stop"}, {"index", index_}});
    text_open_ = false;
    ++index_;
    blocks_ = true;
  }
  void finish(const Outcome& o, std::string* out) override {
    if (!o.result.is_null() && o.result.contains("finish_reason")) {
      if (!blocks_) open_text(out);  // a reply has at least one block
      close_block(out);
      *out += sse("message_delta", json{{"type", "message_delta"},
                                        {"delta", {{"stop_reason", stop_reason(o.result)},
                                                   {"stop_sequence", o.result.contains("stop_sequence") ? o.result["stop_sequence"] : json(nullptr)}}},
                                        {"usage", usage_of(o.result["usage"])}});
    }
    if (o.error) {
      *out += sse("error", error_json(o.error->http_status, o.error->message));
      end()(o.error->http_status, nullptr, o.error->code);
      return;
    }
    *out += sse("message_stop", json{{"type", "message_stop"}});
    end()(200, o.result["usage"], "");
  }

  ReplyMeta m_;
  int index_ = 0;           // the block being written, or the next one
  bool text_open_ = false;  // a text block is open at index_
  bool blocks_ = false;     // a block has been closed
};

}  // namespace

HttpResponse anthropic_error_reply(const ApiError& e) { return json_reply(error_json(e.http_status, e.message), e.http_status); }

void reply_messages(Reply reply, std::shared_ptr<Ticket> ticket, ReplyMeta m, ReplyDone done) {
  if (!m.stream) {
    return when_finished(std::move(ticket), [reply, m, done](std::string text, Outcome o) {
      if (o.error) {
        done(o.error->http_status, nullptr, o.error->code);
        return reply(anthropic_error_reply(*o.error));
      }
      json body = message_json(m, o.result.value("text", text), o.result);
      done(200, o.result["usage"], "");
      reply(json_reply(body));
    });
  }
  reply(sse_response(std::make_shared<MessagesStream>(std::move(ticket), std::move(m), std::move(done))));
}

}  // namespace hypic::server
