#include "server/logprobs_json.h"

#include <cmath>

namespace hypic::server {

using namespace api;  // the server speaks the API's types

using nlohmann::json;

namespace {

json byte_list(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

json chat_entry(const TokenLogprob& t) {
  return json{{"token", t.bytes}, {"logprob", t.logprob}, {"bytes", byte_list(t.bytes)}};
}

}  // namespace

json logprobs_json(const std::vector<PositionLogprobs>& lp, Endpoint ep, size_t offset) {
  if (ep == Endpoint::kChat) {
    json content = json::array();
    for (const PositionLogprobs& p : lp) {
      json e = chat_entry(p.chosen);
      e["top_logprobs"] = json::array();
      for (const TokenLogprob& t : p.top) e["top_logprobs"].push_back(chat_entry(t));
      content.push_back(std::move(e));
    }
    return json{{"content", std::move(content)}, {"refusal", nullptr}};
  }
  json tokens = json::array(), values = json::array(), top = json::array(), offsets = json::array();
  for (const PositionLogprobs& p : lp) {
    tokens.push_back(p.chosen.bytes);
    const bool scored = !std::isnan(p.chosen.logprob);  // an echoed prompt's first token is not
    values.push_back(scored ? json(p.chosen.logprob) : json(nullptr));
    json alts = json::object();
    for (const TokenLogprob& t : p.top) alts[t.bytes] = t.logprob;  // OpenAI's form: a map (two tokens of the same text: one key)
    top.push_back(scored ? std::move(alts) : json(nullptr));
    offsets.push_back(offset);
    offset += p.chosen.bytes.size();
  }
  return json{{"tokens", std::move(tokens)}, {"token_logprobs", std::move(values)}, {"top_logprobs", std::move(top)},
              {"text_offset", std::move(offsets)}};
}

}  // namespace hypic::server
