#include "api/tokenize.h"

#include <set>

#include "api/http_util.h"
#include "tokenizer/unicode.h"

namespace hypic::api {

using nlohmann::json;

namespace {

// Fields of /tokenize that are not a chat request's.
const std::set<std::string, std::less<>> kTokenizeFields = {
    "content", "prompt", "parse_special", "with_pieces", "return_token_strs",
    "add_special", "add_special_tokens", "add_generation_prompt", "model", "messages"};

std::optional<ApiError> get_bool(const json& j, const char* key, bool* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return wrong_type(key, "true or false", *it);
  *out = it->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> check_model(const json& j, const std::string& served, std::string* model) {
  auto it = j.find("model");
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return wrong_type("model", "a string", *it);
  *model = it->get<std::string>();
  if (*model != served) return model_not_found(*model, served);
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_tokenize(std::string_view body, const RequestLimits& lim, const std::string& model,
                                       TokenizeRequest* out) {
  *out = TokenizeRequest{};
  json j;
  if (auto e = parse_json_body(body, lim, &j)) return e;
  if (auto e = check_model(j, model, &out->model)) return e;
  bool add_special = false, add_generation_prompt = true;
  for (auto [key, dst] : {std::pair{"parse_special", &out->parse_special}, {"with_pieces", &out->with_pieces},
                          {"return_token_strs", &out->token_strs}, {"add_special", &add_special},
                          {"add_special_tokens", &add_special}, {"add_generation_prompt", &add_generation_prompt}})
    if (auto e = get_bool(j, key, dst)) return e;
  const bool has_content = j.contains("content"), has_prompt = j.contains("prompt");
  if (j.contains("messages")) {
    if (has_content || has_prompt)
      return bad_request("give either 'messages' or '" + std::string(has_content ? "content" : "prompt") +
                         "', not both", "messages", "invalid_value");
    if (!add_generation_prompt)
      return bad_request("'add_generation_prompt': false is not supported: hypic tokenizes a chat as "
                         "/v1/chat/completions gives it to the model, with the assistant's header",
                         "add_generation_prompt", "unsupported_parameter");
    out->chat = json::object();
    for (const auto& item : j.items())
      if (item.key() == "messages" || !kTokenizeFields.count(item.key())) out->chat[item.key()] = item.value();
    out->chat["model"] = model;
    out->chat["max_tokens"] = 1;
    return std::nullopt;
  }
  for (const auto& item : j.items())
    if (!kTokenizeFields.count(item.key()))
      return bad_request("'" + item.key() + "' is not a field of /tokenize (text: 'content' or 'prompt'; a chat: "
                         "'messages' and a chat request's fields)", item.key(), "unsupported_parameter");
  if (has_content && has_prompt)
    return bad_request("give either 'content' or 'prompt', not both", "prompt", "invalid_value");
  if (!has_content && !has_prompt)
    return bad_request("'content' (or 'prompt', or 'messages') is required", "content", "missing_required_parameter");
  const char* key = has_content ? "content" : "prompt";
  if (!j[key].is_string()) return wrong_type(key, "a string", j[key]);
  out->text = j[key].get<std::string>();
  return std::nullopt;
}

json tokenize_response(const Tokenizer& tok, const TokenizeRequest& r, const std::vector<int32_t>& ids,
                       int64_t max_model_len) {
  json tokens = json::array(), strs = json::array();
  for (int32_t id : ids) {
    if (r.token_strs) strs.push_back(tok.token_str(id));
    if (!r.with_pieces) {
      tokens.push_back(id);
      continue;
    }
    // llama-server's piece: the text, or its bytes where they are not whole UTF-8 characters
    const std::string_view b = tok.token_bytes(id);
    json piece = std::string(b);
    if (unicode::valid_utf8_prefix(b) != b.size()) {
      piece = json::array();
      for (unsigned char c : b) piece.push_back(int(c));
    }
    tokens.push_back(json{{"id", id}, {"piece", piece}});
  }
  json out{{"tokens", tokens}, {"count", ids.size()}, {"max_model_len", max_model_len}};
  if (r.token_strs) out["token_strs"] = strs;
  return out;
}

std::optional<ApiError> detokenize(std::string_view body, const RequestLimits& lim, const std::string& model,
                                   const Tokenizer& tok, json* response) {
  json j;
  if (auto e = parse_json_body(body, lim, &j)) return e;
  std::string asked;
  if (auto e = check_model(j, model, &asked)) return e;
  for (const auto& item : j.items())
    if (item.key() != "tokens" && item.key() != "model")
      return bad_request("'" + item.key() + "' is not a field of /detokenize (it takes 'tokens' and 'model')",
                         item.key(), "unsupported_parameter");
  auto it = j.find("tokens");
  if (it == j.end() || it->is_null()) return bad_request("'tokens' is required", "tokens", "missing_required_parameter");
  if (!it->is_array()) return wrong_type("tokens", "an array of token ids", *it);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& v = (*it)[i];
    const std::string param = "tokens[" + std::to_string(i) + "]";
    if (!v.is_number_integer()) return wrong_type(param, "an integer token id", v);
    const int64_t id = v.get<int64_t>();
    if (id < 0 || id > INT32_MAX || !tok.is_known(int32_t(id)))
      return bad_request("'" + param + "' is " + std::to_string(id) + ", which is no token of this model's "
                         "vocabulary (" + std::to_string(tok.vocab_size()) + " ids)", param, "invalid_value");
    ids.push_back(int32_t(id));
  }
  const std::string text = tok.decode(ids);
  *response = json{{"content", text}, {"prompt", text}};
  return std::nullopt;
}

}  // namespace hypic::api
