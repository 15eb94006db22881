#include "api/respond.h"

#include <atomic>
#include <mutex>

#include "api/anthropic.h"
#include "api/http_util.h"

namespace hypic::api {

using nlohmann::json;

namespace {

json chunk(const ReplyMeta& m, json delta_or_text, json finish, json logprobs = nullptr, int index = 0) {
  json choice{{"index", index}, {"finish_reason", std::move(finish)}, {"logprobs", std::move(logprobs)}};
  if (m.chat) choice["delta"] = std::move(delta_or_text);
  else choice["text"] = std::move(delta_or_text);
  return json{{"id", m.id}, {"object", m.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", m.created}, {"model", m.model}, {"choices", json::array({choice})}};
}

std::string event(const json& j) { return "data: " + dump(j) + "\n\n"; }

// A choice's calls as OpenAI's message.tool_calls.
json openai_tool_calls(const std::vector<ToolCall>& calls) {
  json out = json::array();
  for (const ToolCall& c : calls)
    out.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return out;
}

// Collects the text until the outcome. The wake runs on the thread that fed the ticket;
// steps never overlap (a wake is registered only by the step that then returns).
struct Collector : std::enable_shared_from_this<Collector> {
  std::shared_ptr<Ticket> ticket;
  std::function<void(std::string, Outcome)> fn;
  std::string text;

  void step() {
    for (;;) {
      Ticket::Piece piece;
      Outcome o;
      const auto n = ticket->poll(&piece, &o, [self = shared_from_this()] { self->step(); });
      if (n == Ticket::Next::kPending) return;
      if (n == Ticket::Next::kText) {
        if (piece.choice == 0 && !piece.tool_call && !piece.reasoning) text += piece.text;
        continue;
      }
      return fn(std::move(text), std::move(o));
    }
  }
};

class ChunkStream final : public TicketBodyStream {
 public:
  ChunkStream(std::shared_ptr<Ticket> t, ReplyMeta m, ReplyDone done)
      : TicketBodyStream(std::move(t), std::move(done)), m_(std::move(m)) {}

 private:
  void start(std::string* out) override {
    if (m_.chat)
      for (int i = 0; i < m_.choices; ++i) *out += event(chunk(m_, json{{"role", "assistant"}, {"content", ""}}, nullptr, nullptr, i));
  }
  void piece(const std::string& text, json logprobs, int choice, std::string* out) override {
    *out += event(chunk(m_, m_.chat ? json{{"content", text}} : json(text), nullptr, std::move(logprobs), choice));
  }
  // As vLLM and llama-server stream it.
  void reasoning(const std::string& text, int choice, std::string* out) override {
    if (m_.chat) *out += event(chunk(m_, json{{"reasoning_content", text}}, nullptr, nullptr, choice));
  }
  // As vLLM streams them: the id and name first, then the arguments.
  void tool_call(const ToolCall& call, int index, int choice, std::string* out) override {
    const json head{{"index", index}, {"id", call.id}, {"type", "function"},
                    {"function", {{"name", call.name}, {"arguments", ""}}}};
    *out += event(chunk(m_, json{{"tool_calls", json::array({head})}}, nullptr, nullptr, choice));
    const json args{{"index", index}, {"function", {{"arguments", call.arguments}}}};
    *out += event(chunk(m_, json{{"tool_calls", json::array({args})}}, nullptr, nullptr, choice));
  }
  void finish(const Outcome& o, std::string* out) override {
    if (o.completion) {
      const auto& choices = o.completion->choices;
      for (size_t i = 0; i < choices.size(); ++i)
        *out += event(chunk(m_, m_.chat ? json::object() : json(""), choices[i].finish_reason, nullptr, int(i)));
      if (m_.include_usage) {
        json u = chunk(m_, nullptr, nullptr);
        u["choices"] = json::array();
        u["usage"] = usage_json(o.completion->usage);
        *out += event(u);
      }
    }
    if (o.error) *out += event(o.error->to_json());
    *out += "data: [DONE]\n\n";
    if (o.error) end()(o.error->http_status, nullptr, o.error->code);
    else end()(200, o.completion ? usage_json(o.completion->usage) : json(nullptr), "");
  }

  ReplyMeta m_;
};

}  // namespace

BodyStream::Poll TicketBodyStream::poll(std::string* out, const std::function<void()>& wake) {
  if (!started_) {
    started_ = true;
    start(out);
  }
  for (;;) {
    Ticket::Piece p;
    Outcome o;
    const auto n = ticket_->poll(&p, &o, wake);
    if (n == Ticket::Next::kPending) return out->empty() ? Poll::kPending : Poll::kData;
    if (n == Ticket::Next::kText) {
      if (p.tool_call) tool_call(*p.tool_call, p.call_index, p.choice, out);
      else if (p.reasoning) reasoning(p.text, p.choice, out);
      else piece(p.text, std::move(p.logprobs), p.choice, out);
      if (out->size() >= (64u << 10)) return Poll::kData;
      continue;
    }
    finish(o, out);
    return Poll::kDone;
  }
}

void TicketBodyStream::abandon() {
  ticket_->cancel();
  (*end_)(499, nullptr, "cancelled");
}

void when_finished(std::shared_ptr<Ticket> ticket, std::function<void(std::string text, Outcome o)> fn) {
  auto c = std::make_shared<Collector>();
  c->ticket = std::move(ticket);
  c->fn = std::move(fn);
  c->step();
}

void reply_completion(Reply reply, std::shared_ptr<Ticket> ticket, ReplyMeta m, ReplyDone done) {
  if (m.anthropic) return reply_messages(std::move(reply), std::move(ticket), std::move(m), std::move(done));
  if (!m.stream) {
    return when_finished(std::move(ticket), [reply, m, done](std::string, Outcome o) {
      // The end is reported (the log line written) before the answer goes out, so a client
      // that has its answer finds the request in the log.
      if (o.error) {
        done(o.error->http_status, nullptr, o.error->code);
        return reply(error_reply(*o.error));
      }
      const CompletionResult& result = *o.completion;  // a job without an error has one
      json choices = json::array();
      for (const ChoiceResult& c : result.choices) {
        json choice{{"index", choices.size()}, {"finish_reason", c.finish_reason}, {"logprobs", c.logprobs}};
        if (m.chat) {
          choice["message"] = {{"role", "assistant"},
                               {"content", !c.text.empty() || c.tool_calls.empty() ? json(c.text) : json(nullptr)}};
          if (!c.reasoning.empty()) choice["message"]["reasoning_content"] = c.reasoning;
          if (!c.tool_calls.empty()) choice["message"]["tool_calls"] = openai_tool_calls(c.tool_calls);
        } else {
          choice["text"] = c.text;
        }
        choices.push_back(std::move(choice));
      }
      json usage = usage_json(result.usage);
      json body{{"id", m.id}, {"object", m.chat ? "chat.completion" : "text_completion"},
                {"created", m.created}, {"model", m.model}, {"choices", std::move(choices)}, {"usage", usage}};
      done(200, usage, "");
      reply(json_reply(body));
    });
  }
  reply(sse_response(std::make_shared<ChunkStream>(std::move(ticket), std::move(m), std::move(done))));
}

HttpResponse sse_response(std::shared_ptr<BodyStream> stream) {
  HttpResponse r;
  r.content_type = "text/event-stream";
  r.set("Cache-Control", "no-cache");
  r.stream = std::move(stream);
  return r;
}

}  // namespace hypic::api
