// The operational endpoints: POST /tokenize and /detokenize (llama-server's and vLLM's shapes),
// GET /version and /props, behind the API key; CORS (--cors-origin). The server on
// tests/models/qwen3_5_dense.
#include <gtest/gtest.h>

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "api/request.h"
#include "core/version.h"
#include "engine/prompt.h"
#include "server/running_server.h"

namespace hypic::server {
namespace {

using nlohmann::json;
using test::Running;

class OpsEndpoints : public test::ServerSuite {
 protected:
  static json post(httplib::Client& c, const std::string& path, const json& body, int* status,
                   const httplib::Headers& h = {}) {
    auto r = c.Post(path.c_str(), h, body.dump(), "application/json");
    *status = r ? r->status : -1;
    return r ? json::parse(r->body, nullptr, false) : json();
  }
};

const std::string kText = "Hello, world! caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd<|im_end|> 12345";

std::vector<int32_t> ids_of(const json& tokens) {
  std::vector<int32_t> ids;
  for (const json& t : tokens) ids.push_back(t.is_object() ? t["id"].get<int32_t>() : t.get<int32_t>());
  return ids;
}

TEST_F(OpsEndpoints, TokenizeDetokenizeRoundTrip) {
  Running s(*model_, *tok_, opts());
  auto c = s.client();
  int st = 0;
  const std::vector<int32_t> want = tok_->encode(kText);
  // llama-server's shape
  json r = post(c, "/tokenize", json{{"content", kText}}, &st);
  ASSERT_EQ(st, 200) << r.dump();
  EXPECT_EQ(ids_of(r["tokens"]), want);
  EXPECT_EQ(r["count"], want.size());
  EXPECT_EQ(r["max_model_len"], model_->config().max_position_embeddings);
  // vLLM's shape, with the vocabulary's forms
  r = post(c, "/tokenize", json{{"model", "tiny"}, {"prompt", kText}, {"add_special_tokens", true},
                                 {"return_token_strs", true}}, &st);
  ASSERT_EQ(st, 200) << r.dump();
  EXPECT_EQ(ids_of(r["tokens"]), want);
  ASSERT_EQ(r["token_strs"].size(), want.size());
  EXPECT_EQ(r["token_strs"][0], tok_->token_str(want[0]));
  // special tokens as text: <|im_end|> is no longer one id
  const int32_t im_end = tok_->token_id("<|im_end|>");
  ASSERT_GE(im_end, 0);
  r = post(c, "/tokenize", json{{"content", "<|im_end|>"}, {"parse_special", false}}, &st);
  ASSERT_EQ(st, 200);
  EXPECT_GT(r["tokens"].size(), 1u);
  EXPECT_EQ(ids_of(post(c, "/tokenize", json{{"content", "<|im_end|>"}}, &st)["tokens"]), std::vector<int32_t>{im_end});
  // pieces: text where whole characters, bytes where not; their bytes make the text
  r = post(c, "/tokenize", json{{"content", kText}, {"with_pieces", true}}, &st);
  ASSERT_EQ(st, 200);
  std::string joined;
  for (const json& t : r["tokens"]) {
    if (t["piece"].is_string()) joined += t["piece"].get<std::string>();
    else for (const json& b : t["piece"]) joined += char(b.get<int>());
  }
  EXPECT_EQ(joined, kText);
  EXPECT_EQ(ids_of(r["tokens"]), want);
  // and back
  json d = post(c, "/detokenize", json{{"tokens", want}}, &st);
  ASSERT_EQ(st, 200) << d.dump();
  EXPECT_EQ(d["content"], kText);
  EXPECT_EQ(d["prompt"], kText);
}

// A chat is tokenized as /v1/chat/completions gives it to the model.
TEST_F(OpsEndpoints, TokenizeAChatAsTheCompletionDoes) {
  Running s(*model_, *tok_, opts());
  auto c = s.client();
  const json messages = json::array({json{{"role", "system"}, {"content", "Be brief."}},
                                     json{{"role", "user"}, {"content", "Tell me a story"}}});
  api::ApiRequest r;
  ASSERT_FALSE(api::parse_request(json{{"model", "tiny"}, {"messages", messages}, {"max_tokens", 1}}.dump(),
                                  api::Endpoint::kChat, api::RequestLimits{}, &r));
  PromptParts parts;
  ASSERT_FALSE(build_prompt(*tok_, model_chat_template(model_->config()), r, 100000, &parts));
  int st = 0;
  json got = post(c, "/tokenize", json{{"messages", messages}, {"add_generation_prompt", true}}, &st);
  ASSERT_EQ(st, 200) << got.dump();
  EXPECT_EQ(ids_of(got["tokens"]), parts.concatenated());
  got = post(c, "/tokenize", json{{"messages", messages}, {"add_generation_prompt", false}}, &st);
  EXPECT_EQ(st, 400);
  EXPECT_EQ(got["error"]["param"], "add_generation_prompt");
  got = post(c, "/tokenize", json{{"messages", messages}, {"temprature", 0}}, &st);  // a chat field misspelt
  EXPECT_EQ(st, 400) << got.dump();
}

TEST_F(OpsEndpoints, BadRequestsNameWhatIsWrong) {
  Running s(*model_, *tok_, opts());
  auto c = s.client();
  int st = 0;
  struct Case {
    const char* path;
    json body;
    int status;
    const char* param;
  };
  const Case cases[] = {
      {"/tokenize", json{{"content", "a"}, {"prompt", "b"}}, 400, "prompt"},
      {"/tokenize", json::object(), 400, "content"},
      {"/tokenize", json{{"content", 7}}, 400, "content"},
      {"/tokenize", json{{"content", "a"}, {"with_pieces", "yes"}}, 400, "with_pieces"},
      {"/tokenize", json{{"content", "a"}, {"max_tokens", 3}}, 400, "max_tokens"},
      {"/tokenize", json{{"content", "a"}, {"model", "gpt-9"}}, 404, ""},
      {"/detokenize", json{{"tokens", json::array({1, -4})}}, 400, "tokens[1]"},
      {"/detokenize", json{{"tokens", json::array({1, 1 << 30})}}, 400, "tokens[1]"},
      {"/detokenize", json{{"tokens", "1 2"}}, 400, "tokens"},
      {"/detokenize", json{{"ids", json::array({1})}}, 400, "ids"},
  };
  for (const Case& k : cases) {
    json e = post(c, k.path, k.body, &st);
    EXPECT_EQ(st, k.status) << k.path << " " << k.body.dump();
    if (*k.param) {
      EXPECT_EQ(e["error"]["param"], k.param) << k.path << " " << k.body.dump() << " → " << e.dump();
    }
  }
  auto r = c.Post("/tokenize", "{not json", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  // and the server still serves
  EXPECT_EQ(post(c, "/tokenize", json{{"content", "ok"}}, &st)["count"], tok_->encode("ok").size());
}

TEST_F(OpsEndpoints, VersionAndPropsBehindTheKey) {
  ServerOptions o = opts();
  o.api_key = "sekrit";
  o.limits.default_max_tokens = 77;
  Running s(*model_, *tok_, o);
  auto c = s.client();
  const httplib::Headers key{{"Authorization", "Bearer sekrit"}};
  for (const char* path : {"/version", "/props"}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << path;
  }
  int st = 0;
  post(c, "/tokenize", json{{"content", "x"}}, &st);
  EXPECT_EQ(st, 401);
  post(c, "/detokenize", json{{"tokens", json::array({1})}}, &st);
  EXPECT_EQ(st, 401);
  auto v = c.Get("/version", key);
  ASSERT_TRUE(v);
  ASSERT_EQ(v->status, 200);
  EXPECT_EQ(json::parse(v->body)["version"], version());
  auto p = c.Get("/props", key);
  ASSERT_TRUE(p);
  ASSERT_EQ(p->status, 200);
  const json props = json::parse(p->body);
  EXPECT_EQ(props["model"], "tiny");
  EXPECT_EQ(props["context_tokens"], model_->config().max_position_embeddings);
  EXPECT_EQ(props["compute_dtype"], "F32");
  EXPECT_EQ(props["defaults"]["max_tokens"], 77);
  EXPECT_EQ(props["api_key_required"], true);
  EXPECT_EQ(p->body.find("sekrit"), std::string::npos);  // no secret in it
}

// CORS: off by default (no headers; a preflight is just an OPTIONS the routes do not take);
// on, an allowed Origin's preflight is answered without the key and its answers carry
// Access-Control-Allow-Origin; another Origin's preflight is 403 and its answers carry none;
// credentials are never allowed.
TEST_F(OpsEndpoints, CorsOriginsAndPreflight) {
  const httplib::Headers preflight{{"Origin", "http://app.example"}, {"Access-Control-Request-Method", "POST"},
                                   {"Access-Control-Request-Headers", "authorization, content-type"}};
  {
    Running s(*model_, *tok_, opts());
    auto c = s.client();
    auto r = c.Options("/tokenize", preflight);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 405);
    EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
    auto g = c.Get("/version", {{"Origin", "http://app.example"}});
    ASSERT_TRUE(g);
    EXPECT_FALSE(g->has_header("Access-Control-Allow-Origin"));
  }
  ServerOptions o = opts();
  o.api_key = "sekrit";
  o.http.cors_origins = {"http://app.example", "https://other.example:8443"};
  Running s(*model_, *tok_, o);
  auto c = s.client();
  auto r = c.Options("/tokenize", preflight);  // no key: browsers send none on a preflight
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_NE(r->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Credentials"));
  httplib::Headers evil = preflight;
  evil.erase("Origin");
  evil.emplace("Origin", "http://evil.example");
  r = c.Options("/tokenize", evil);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "cors_origin_not_allowed");
  // the requests themselves: the key is still required; the answer names the allowed Origin
  int st = 0;
  post(c, "/tokenize", json{{"content", "x"}}, &st, {{"Origin", "http://app.example"}});
  EXPECT_EQ(st, 401);
  auto ok = c.Post("/tokenize", {{"Origin", "https://other.example:8443"}, {"Authorization", "Bearer sekrit"}},
                   json{{"content", "x"}}.dump(), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->get_header_value("Access-Control-Allow-Origin"), "https://other.example:8443");
  EXPECT_EQ(ok->get_header_value("Vary"), "Origin");
  auto other = c.Get("/version", {{"Origin", "http://evil.example"}, {"Authorization", "Bearer sekrit"}});
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 200);
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));
}

TEST_F(OpsEndpoints, CorsAnyOrigin) {
  ServerOptions o = opts();
  o.http.cors_origins = {"*"};
  Running s(*model_, *tok_, o);
  auto c = s.client();
  auto r = c.Get("/version", {{"Origin", "http://anywhere.example"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "*");
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Credentials"));
  auto h = c.Get("/health");  // no Origin: no CORS headers
  ASSERT_TRUE(h);
  EXPECT_FALSE(h->has_header("Access-Control-Allow-Origin"));
}

}  // namespace
}  // namespace hypic::server
