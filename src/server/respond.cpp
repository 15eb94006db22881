#include "server/respond.h"

#include <httplib.h>

#include "server/http_util.h"

namespace hypic::server {

using nlohmann::json;

namespace {

json chunk(const ReplyMeta& m, json delta_or_text, json finish) {
  json choice{{"index", 0}, {"finish_reason", std::move(finish)}, {"logprobs", nullptr}};
  if (m.chat) choice["delta"] = std::move(delta_or_text);
  else choice["text"] = std::move(delta_or_text);
  return json{{"id", m.id}, {"object", m.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", m.created}, {"model", m.model}, {"choices", json::array({choice})}};
}

// The reply's end, reported once: by the provider or (client gone before it ran, or while
// it wrote) by the releaser; both run on the connection's thread.
struct Once {
  ReplyDone done;
  bool called = false;
  void operator()(int status, const json& usage, const std::string& code) {
    if (called) return;
    called = true;
    done(status, usage, code);
  }
};

}  // namespace

void reply_completion(httplib::Response& res, std::shared_ptr<Ticket> ticket, ReplyMeta m,
                      ReplyDone done) {
  if (!m.stream) {
    std::string streamed;
    Outcome o = ticket->wait(&streamed);
    if (o.error) {
      send_error(res, *o.error);
      return done(o.error->http_status, nullptr, o.error->code);
    }
    json choice{{"index", 0}, {"finish_reason", o.result["finish_reason"]}, {"logprobs", nullptr}};
    if (m.chat) choice["message"] = {{"role", "assistant"}, {"content", o.result["text"]}};
    else choice["text"] = o.result["text"];
    json body{{"id", m.id}, {"object", m.chat ? "chat.completion" : "text_completion"},
              {"created", m.created}, {"model", m.model}, {"choices", json::array({choice})},
              {"usage", o.result["usage"]}};
    res.set_content(dump(body), "application/json");
    return done(200, o.result["usage"], "");
  }
  auto end = std::make_shared<Once>(Once{std::move(done)});
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [ticket, m, end](size_t, httplib::DataSink& sink) {
        auto send = [&](const json& j) {
          const std::string s = "data: " + dump(j) + "\n\n";
          return sink.write(s.data(), s.size());
        };
        auto gone = [&] {
          ticket->cancel();
          (*end)(499, nullptr, "cancelled");
          return false;
        };
        if (m.chat && !send(chunk(m, json{{"role", "assistant"}, {"content", ""}}, nullptr))) return gone();
        std::string piece;
        Outcome o;
        while (ticket->next(&piece, &o))
          if (!send(chunk(m, m.chat ? json{{"content", piece}} : json(piece), nullptr))) return gone();
        if (o.error) {
          send(o.error->to_json());
        } else {
          send(chunk(m, m.chat ? json::object() : json(""), o.result["finish_reason"]));
          if (m.include_usage) {
            json u = chunk(m, nullptr, nullptr);
            u["choices"] = json::array();
            u["usage"] = o.result["usage"];
            send(u);
          }
        }
        const std::string fin = "data: [DONE]\n\n";
        sink.write(fin.data(), fin.size());
        sink.done();
        if (o.error) (*end)(o.error->http_status, nullptr, o.error->code);
        else (*end)(200, o.result["usage"], "");
        return true;
      },
      [ticket, end](bool success) {
        if (success) return;
        ticket->cancel();
        (*end)(499, nullptr, "cancelled");
      });
}

}  // namespace hypic::server
