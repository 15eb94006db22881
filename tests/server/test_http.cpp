// End to end: the server on an ephemeral loopback port with tests/models/qwen3_5_dense,
// spoken to with httplib::Client.
#include <gtest/gtest.h>

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/generate.h"
#include "engine/prompt.h"
#include "server/exposition_check.h"
#include "engine/logprobs.h"
#include "server/http_server.h"
#include "server/running_server.h"

namespace hypic::server {

using namespace api;
namespace {

using nlohmann::json;

using test::Running;

class HttpTest : public test::ServerSuite {
 protected:
  static json chat_body(int max_tokens = 8) {
    return json{{"model", "tiny"},
                {"temperature", 0},
                {"max_tokens", max_tokens},
                {"hypic", {{"mode", "full"}}},
                {"messages", json::array({json{{"role", "system"}, {"content", "Be brief."}},
                                          json{{"role", "user"}, {"content", "Tell me a story"}}})}};
  }
  static json bad_model_body() {
    json b = chat_body(1);
    b["model"] = "gpt-9";
    return b;
  }
  static json seg_body(const std::string& salt) {
    json content = json::array(
        {json{{"type", "text"}, {"text", "The first document talks about rivers and lakes."}, {"cache_control", {{"type", "segment"}}}},
         json{{"type", "text"}, {"text", "A second document, on mountains and valleys."}, {"hypic_segment", true}},
         json{{"type", "text"}, {"text", "Summarise both."}}});
    json b{{"model", "tiny"}, {"temperature", 0}, {"max_tokens", 4},
           {"messages", json::array({json{{"role", "user"}, {"content", content}}})}};
    if (!salt.empty()) b["cache_salt"] = salt;
    return b;
  }
  static json post(httplib::Client& c, const std::string& path, const json& body, int* status,
                   const httplib::Headers& h = {}) {
    auto r = c.Post(path.c_str(), h, body.dump(), "application/json");
    if (!r) {
      ADD_FAILURE() << "no response from " << path;
      *status = -1;
      return json();
    }
    *status = r->status;
    return json::parse(r->body, nullptr, false);
  }
  static json get(httplib::Client& c, const std::string& path, int* status,
                  const httplib::Headers& h = {}) {
    auto r = c.Get(path.c_str(), h);
    if (!r) {
      ADD_FAILURE() << "no response from GET " << path;
      *status = -1;
      return json();
    }
    *status = r->status;
    return json::parse(r->body, nullptr, false);
  }
  static json del(httplib::Client& c, const std::string& path, int* status) {
    auto r = c.Delete(path.c_str());
    if (!r) {
      ADD_FAILURE() << "no response from DELETE " << path;
      *status = -1;
      return json();
    }
    *status = r->status;
    return json::parse(r->body, nullptr, false);
  }
  // A document long enough to have a cache entry with the default seam.
  static std::string doc(const std::string& topic) {
    std::string d;
    for (int i = 0; i < 4; ++i) d += "This document is about " + topic + ", part " + std::to_string(i) + ". ";
    return d;
  }
  // A chat request whose last user message is `parts` then a question.
  static json parts_body(json parts, const std::string& salt, int max_tokens = 4) {
    parts.push_back(json{{"type", "text"}, {"text", "Summarise."}});
    json b{{"model", "tiny"}, {"temperature", 0}, {"max_tokens", max_tokens},
           {"messages", json::array({json{{"role", "user"}, {"content", parts}}})}};
    if (!salt.empty()) b["cache_salt"] = salt;
    return b;
  }
  static json ref(const std::string& id) { return json{{"type", "segment"}, {"segment_id", id}}; }
  static json inline_seg(const std::string& text) {
    return json{{"type", "text"}, {"text", text}, {"hypic_segment", true}};
  }
  static std::string metrics_text(httplib::Client& c) {
    auto r = c.Get("/metrics");
    if (!r || r->status != 200) {
      ADD_FAILURE() << "GET /metrics failed";
      return "";
    }
    EXPECT_EQ(r->get_header_value("Content-Type").rfind("text/plain", 0), 0u);
    EXPECT_EQ(check_exposition(r->body), "") << r->body;
    return r->body;
  }
  // The value of one series ("name" or "name{label=\"v\"}"); 0 if absent.
  static double metric(const std::string& text, const std::string& series) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
    return 0;
  }
};

TEST_F(HttpTest, HealthAndModels) {
  Running s(*model_, *tok_, opts());
  auto c = s.client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  const json j = json::parse(m->body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["id"], "tiny");
  auto nf = c.Get("/v1/nothing");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);
  EXPECT_TRUE(json::parse(nf->body, nullptr, false).contains("error"));
}

TEST_F(HttpTest, ChatMatchesGenerateAndStreamingMatches) {
  Running s(*model_, *tok_, opts());
  auto c = s.client();
  const json body = chat_body(8);
  ApiRequest r;
  ASSERT_FALSE(parse_request(body.dump(), Endpoint::kChat, RequestLimits{}, &r));
  PromptParts parts;
  ASSERT_FALSE(build_prompt(*tok_, model_chat_template(model_->config()), r, 100000, &parts));
  auto ref = generate(*model_, *tok_, parts.concatenated(), generate_options(r));
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();

  int st = 0;
  const json j = post(c, "/v1/chat/completions", body, &st);
  ASSERT_EQ(st, 200) << j.dump();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], ref->text);
  EXPECT_EQ(j["choices"][0]["finish_reason"], ref->finish_reason);
  EXPECT_EQ(j["usage"]["prompt_tokens"], parts.total_tokens());
  EXPECT_EQ(j["usage"]["completion_tokens"], int64_t(ref->tokens.size()));
  EXPECT_TRUE(j["usage"]["prompt_tokens_details"].contains("cached_tokens"));
  EXPECT_TRUE(j["usage"]["hypic"].contains("ttft_ms"));

  json sb = body;
  sb["stream"] = true;
  sb["stream_options"] = {{"include_usage", true}};
  auto res = c.Post("/v1/chat/completions", sb.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  std::vector<std::string> events;
  for (size_t p = 0; p < res->body.size();) {
    size_t e = res->body.find("\n\n", p);
    ASSERT_NE(e, std::string::npos);
    const std::string ev = res->body.substr(p, e - p);
    ASSERT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    events.push_back(ev.substr(6));
    p = e + 2;
  }
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json usage = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], int64_t(ref->tokens.size()));
  std::string text;
  std::string finish;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const json ch = json::parse(events[i]);
    EXPECT_EQ(ch["object"], "chat.completion.chunk");
    const json& d = ch["choices"][0]["delta"];
    if (d.contains("content")) text += d["content"].get<std::string>();
    if (!ch["choices"][0]["finish_reason"].is_null()) finish = ch["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, ref->text);
  EXPECT_EQ(finish, ref->finish_reason);
}

TEST_F(HttpTest, CompletionsEndpoint) {
  Running s(*model_, *tok_, opts());
  auto c = s.client();
  int st = 0;
  const json j = post(c, "/v1/completions",
                      json{{"model", "tiny"}, {"prompt", "Once upon a time"}, {"max_tokens", 3}, {"temperature", 0}}, &st);
  ASSERT_EQ(st, 200) << j.dump();
  EXPECT_EQ(j["object"], "text_completion");
  auto ref = generate(*model_, *tok_, tok_->encode("Once upon a time"), [] {
    GenerateOptions g;
    g.max_tokens = 3;
    return g;
  }());
  ASSERT_TRUE(ref.is_ok());
  EXPECT_EQ(j["choices"][0]["text"], ref->text);
}

TEST_F(HttpTest, CompletionsTakeTokenIds) {
  Running s(*model_, *tok_, opts());
  auto c = s.client();
  int st = 0;
  const json text = post(c, "/v1/completions",
                         json{{"model", "tiny"}, {"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0}}, &st);
  ASSERT_EQ(st, 200) << text.dump();
  const std::vector<int32_t> ids = tok_->encode("Once upon a time");
  for (const json& prompt : {json(ids), json::array({json(ids)})}) {
    const json j = post(c, "/v1/completions", json{{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 4}, {"temperature", 0}}, &st);
    ASSERT_EQ(st, 200) << j.dump();
    EXPECT_EQ(j["choices"][0]["text"], text["choices"][0]["text"]);
    EXPECT_EQ(j["usage"]["prompt_tokens"], int(ids.size()));
  }
  const json bad = post(c, "/v1/completions",
                        json{{"model", "tiny"}, {"prompt", json::array({1, tok_->vocab_size()})}, {"max_tokens", 1}}, &st);
  EXPECT_EQ(st, 400);
  EXPECT_EQ(bad["error"]["param"], "prompt");
  EXPECT_NE(bad["error"]["message"].get<std::string>().find("vocabulary"), std::string::npos) << bad.dump();
}

TEST_F(HttpTest, LogprobsOfChatAndCompletions) {
  Running s(*model_, *tok_, opts());
  auto c = s.client();
  int st = 0;
  json body = chat_body(5);
  body["temperature"] = 0;
  body["logprobs"] = true;
  body["top_logprobs"] = 3;
  const json j = post(c, "/v1/chat/completions", body, &st);
  ASSERT_EQ(st, 200) << j.dump();
  const json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(int(content.size()), j["usage"]["completion_tokens"].get<int>() - (j["choices"][0]["finish_reason"] == "stop"));
  std::string joined;
  for (const json& e : content) {
    ASSERT_EQ(e["top_logprobs"].size(), 3u);
    EXPECT_EQ(e["top_logprobs"][0]["token"], e["token"]) << "greedy: the top alternative";
    EXPECT_EQ(e["top_logprobs"][0]["logprob"], e["logprob"]);
    EXPECT_LE(e["logprob"].get<double>(), 0.0);
    std::string bytes;
    for (int b : e["bytes"]) bytes += char(b);
    joined += bytes;
  }
  const std::string text = j["choices"][0]["message"]["content"];
  if (text.find("\xEF\xBF\xBD") == std::string::npos) EXPECT_EQ(joined, text);  // else bytes of a broken character
  else EXPECT_FALSE(joined.empty());
  body.erase("top_logprobs");
  const json plain = post(c, "/v1/chat/completions", body, &st);
  ASSERT_EQ(st, 200);
  EXPECT_TRUE(plain["choices"][0]["logprobs"]["content"][0]["top_logprobs"].empty());
  body.erase("logprobs");
  EXPECT_TRUE(post(c, "/v1/chat/completions", body, &st)["choices"][0]["logprobs"].is_null());

  const json k = post(c, "/v1/completions",
                      json{{"model", "tiny"}, {"prompt", "Once upon a time"}, {"max_tokens", 4}, {"temperature", 0},
                           {"logprobs", 2}}, &st);
  ASSERT_EQ(st, 200) << k.dump();
  const json& lp = k["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), lp["token_logprobs"].size());
  ASSERT_EQ(lp["top_logprobs"].size(), lp["tokens"].size());
  EXPECT_EQ(lp["text_offset"][0], 0);
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    EXPECT_LE(lp["top_logprobs"][i].size(), 2u);
    EXPECT_GE(lp["top_logprobs"][i].size(), 1u);
  }

  // Streamed: each chunk carries its tokens' logprobs; together they are the non-streamed ones.
  body["logprobs"] = true;
  body["top_logprobs"] = 3;
  body["stream"] = true;
  auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  json streamed = json::array();
  for (size_t p = 0, e; (e = res->body.find("\n\n", p)) != std::string::npos; p = e + 2) {
    const std::string line = res->body.substr(p, e - p);
    if (line.rfind("data: {", 0) != 0) continue;
    const json ch = json::parse(line.substr(6));
    const json& lp = ch["choices"][0]["logprobs"];
    if (ch["choices"][0]["delta"].contains("content") && !ch["choices"][0]["delta"]["content"].get<std::string>().empty()) {
      ASSERT_TRUE(lp.is_object()) << line;
      for (const json& e : lp["content"]) streamed.push_back(e);
    }
  }
  EXPECT_EQ(streamed, content);

  // Bad input: a 4xx naming the field.
  const std::vector<std::pair<std::string, json>> bad = {
      {"top_logprobs", json{{"logprobs", true}, {"top_logprobs", 21}}},
      {"top_logprobs", json{{"top_logprobs", 2}}},
      {"logprobs", json{{"logprobs", "yes"}}},
  };
  for (const auto& [param, extra] : bad) {
    json b = chat_body(2);
    b.update(extra);
    const json e = post(c, "/v1/chat/completions", b, &st);
    EXPECT_EQ(st, 400) << extra.dump();
    EXPECT_EQ(e["error"]["param"], param) << extra.dump() << e.dump();
  }
  for (const json& extra : {json{{"logprobs", 21}}, json{{"logprobs", true}}, json{{"echo", "yes"}}}) {
    json b{{"model", "tiny"}, {"prompt", "x"}, {"max_tokens", 1}};
    b.update(extra);
    EXPECT_EQ((post(c, "/v1/completions", b, &st), st), 400) << extra.dump();
  }
}

TEST_F(HttpTest, EchoScoresThePrompt) {
  Running s(*model_, *tok_, opts());
  auto c = s.client();
  int st = 0;
  const std::string prompt = "Once upon a time there was";
  const std::vector<int32_t> ids = tok_->encode(prompt);
  // max_tokens 0: the prompt alone, each token's logprob given the ones before (the first: null).
  const json j = post(c, "/v1/completions", json{{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 0}, {"echo", true},
                                                 {"logprobs", 2}}, &st);
  ASSERT_EQ(st, 200) << j.dump();
  EXPECT_EQ(j["choices"][0]["text"], prompt);
  const json& lp = j["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), ids.size());
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_EQ(j["usage"]["completion_tokens"], 0);
  EXPECT_EQ(j["usage"]["prompt_tokens"], int(ids.size()));
  for (size_t i = 1; i < ids.size(); ++i) {  // against a direct forward of the tokens before
    SeqState state = model_->new_state(int64_t(i) + 1);
    std::vector<float> logits;
    ASSERT_TRUE(model_->forward(state, std::vector<int32_t>(ids.begin(), ids.begin() + i), LogitsFor::kLast, &logits).is_ok());
    const PositionLogprobs ref = logprobs_at(logits.data(), int64_t(logits.size()), ids[i], 2, *tok_);
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), ref.chosen.logprob, 1e-3) << i;
    EXPECT_EQ(lp["top_logprobs"][i].size(), ref.top[0].bytes == ref.top[1].bytes ? 1u : 2u);
  }
  // With a completion: the prompt then the answer, which is the plain request's.
  const json plain = post(c, "/v1/completions", json{{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 3},
                                                     {"temperature", 0}}, &st);
  const json both = post(c, "/v1/completions", json{{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 3},
                                                    {"temperature", 0}, {"echo", true}, {"logprobs", 0}}, &st);
  ASSERT_EQ(st, 200) << both.dump();
  EXPECT_EQ(both["choices"][0]["text"], prompt + plain["choices"][0]["text"].get<std::string>());
  EXPECT_EQ(both["choices"][0]["logprobs"]["tokens"].size(),
            ids.size() + plain["usage"]["completion_tokens"].get<size_t>() - (plain["choices"][0]["finish_reason"] == "stop"));
  const json text_only = post(c, "/v1/completions", json{{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 3},
                                                         {"temperature", 0}, {"echo", true}}, &st);
  ASSERT_EQ(st, 200) << text_only.dump();
  EXPECT_EQ(text_only["choices"][0]["text"], both["choices"][0]["text"]);
  EXPECT_TRUE(text_only["choices"][0]["logprobs"].is_null());
}

TEST_F(HttpTest, SegmentsAreReusedAndSaltIsolates) {
  Running s(*model_, *tok_, opts());
  auto c = s.client();
  int st = 0;
  json a = post(c, "/v1/chat/completions", seg_body("tenant-a"), &st);
  ASSERT_EQ(st, 200) << a.dump();
  EXPECT_EQ(a["usage"]["hypic"]["segments_missed"], 2);
  EXPECT_EQ(a["usage"]["hypic"]["segments_hit"], 0);
  json b = post(c, "/v1/chat/completions", seg_body("tenant-a"), &st);
  ASSERT_EQ(st, 200) << b.dump();
  EXPECT_EQ(b["usage"]["hypic"]["segments_hit"], 2);
  EXPECT_GT(b["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
  EXPECT_EQ(b["usage"]["hypic"]["seam_tokens"].get<int64_t>(), 0);  // the composed head restored whole
  // Cold and warm give the same text (the cold path builds what the warm path reads).
  EXPECT_EQ(a["choices"][0]["message"]["content"], b["choices"][0]["message"]["content"]);
  // Another tenant sees nothing of tenant-a's entries.
  json other = post(c, "/v1/chat/completions", seg_body("tenant-b"), &st);
  ASSERT_EQ(st, 200);
  EXPECT_EQ(other["usage"]["hypic"]["segments_hit"], 0);
  EXPECT_EQ(other["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST_F(HttpTest, PerRequestModes) {
  Running s(*model_, *tok_, opts());
  auto c = s.client();
  int st = 0;
  json full = seg_body("m");
  full["hypic"] = {{"mode", "full"}};
  json f1 = post(c, "/v1/chat/completions", full, &st);
  ASSERT_EQ(st, 200) << f1.dump();
  EXPECT_EQ(f1["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  json prefix = seg_body("m");
  prefix["hypic"] = {{"mode", "prefix"}};
  post(c, "/v1/chat/completions", prefix, &st);
  ASSERT_EQ(st, 200);
  json p2 = post(c, "/v1/chat/completions", prefix, &st);
  ASSERT_EQ(st, 200);
  EXPECT_GT(p2["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
  // prefix mode is exact: same text as full.
  EXPECT_EQ(p2["choices"][0]["message"]["content"], f1["choices"][0]["message"]["content"]);
  json naive = seg_body("m");
  naive["hypic"] = {{"mode", "naive"}, {"seam", 2}};
  post(c, "/v1/chat/completions", naive, &st);
  json n2 = post(c, "/v1/chat/completions", naive, &st);
  ASSERT_EQ(st, 200);
  EXPECT_EQ(n2["usage"]["hypic"]["mode"], "naive");
  EXPECT_EQ(n2["usage"]["hypic"]["segments_hit"], 2);
}

TEST_F(HttpTest, ApiKeyRequired) {
  ServerOptions o = opts();
  o.api_key = "sekrit";
  Running s(*model_, *tok_, o);
  auto c = s.client();
  int st = 0;
  json e = post(c, "/v1/chat/completions", chat_body(1), &st);
  EXPECT_EQ(st, 401);
  EXPECT_EQ(e["error"]["code"], "invalid_api_key");
  post(c, "/v1/chat/completions", chat_body(1), &st, {{"Authorization", "Bearer wrong"}});
  EXPECT_EQ(st, 401);
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 401);
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  for (const char* path : {"/metrics", "/v1/segments", "/v1/segments/seg_x"}) {
    auto g = c.Get(path);
    ASSERT_TRUE(g);
    EXPECT_EQ(g->status, 401) << path;
  }
  post(c, "/v1/segments", json{{"text", "x"}}, &st);
  EXPECT_EQ(st, 401);
  post(c, "/v1/chat/completions", chat_body(1), &st, {{"Authorization", "Bearer sekrit"}});
  EXPECT_EQ(st, 200);
  auto m2 = c.Get("/metrics", {{"Authorization", "Bearer sekrit"}});
  ASSERT_TRUE(m2);
  EXPECT_EQ(m2->status, 200);
  EXPECT_EQ(check_exposition(m2->body), "");
}

TEST_F(HttpTest, FullQueueGives429WithRetryAfter) {
  ServerOptions o = opts();
  o.scheduler.workers = 1;
  o.scheduler.max_batch = 1;
  o.scheduler.max_queue = 0;
  o.debug_delay_ms = 700;
  Running s(*model_, *tok_, o);
  int slow_status = 0;
  std::thread slow([&] {
    auto c = s.client();
    post(c, "/v1/chat/completions", chat_body(1), &slow_status);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  auto c = s.client();
  auto r = c.Post("/v1/chat/completions", chat_body(1).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "overloaded");
  slow.join();
  EXPECT_EQ(slow_status, 200);
}

TEST_F(HttpTest, BadRequestsThenGoodOne) {
  ServerOptions o = opts();
  o.limits.max_body_bytes = 4096;
  Running s(*model_, *tok_, o);
  auto c = s.client();
  auto r = c.Post("/v1/chat/completions", "{not json", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  json e = json::parse(r->body);
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  int st = 0;
  json bad_model = chat_body(1);
  bad_model["model"] = "gpt-9";
  e = post(c, "/v1/chat/completions", bad_model, &st);
  EXPECT_EQ(st, 404);
  EXPECT_EQ(e["error"]["param"], "model");
  json n2 = chat_body(1);
  n2["n"] = 17;  // past RequestLimits::max_choices (16)
  e = post(c, "/v1/chat/completions", n2, &st);
  EXPECT_EQ(st, 400);
  EXPECT_EQ(e["error"]["param"], "n");
  json huge = chat_body(1);
  huge["messages"][1]["content"] = std::string(8000, 'x');
  post(c, "/v1/chat/completions", huge, &st);
  EXPECT_EQ(st, 413);
  json too_long = chat_body(1);
  too_long["max_tokens"] = 4096;  // more than the tiny model's context leaves
  e = post(c, "/v1/chat/completions", too_long, &st);
  EXPECT_EQ(st, 400) << e.dump();
  // Segments: registrations and references.
  auto r2 = c.Post("/v1/segments", "{not json", "application/json");
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->status, 400);
  EXPECT_EQ(json::parse(r2->body)["error"]["code"], "invalid_json");
  struct BadSeg {
    json body;
    int status;
    std::string param;
  };
  const std::vector<BadSeg> bad_segs = {
      {json::array(), 400, ""},
      {json{{"ttl", 5}}, 400, "text"},
      {json{{"text", 5}}, 400, "text"},
      {json{{"text", json::object()}}, 400, "text"},
      {json{{"text", ""}}, 400, "text"},
      {json{{"text", "a"}, {"ttl", -5}}, 400, "ttl"},
      {json{{"text", "a"}, {"ttl", 0}}, 400, "ttl"},
      {json{{"text", "a"}, {"ttl", 1e18}}, 400, "ttl"},
      {json{{"text", "a"}, {"ttl", 10000000000LL}}, 400, "ttl"},
      {json{{"text", "a"}, {"ttl", "1h"}}, 400, "ttl"},
      {json{{"text", "a"}, {"cache_salt", json::array()}}, 400, "cache_salt"},
      {json{{"text", "a"}, {"seam", -1}}, 400, "seam"},
      {json{{"text", "a"}, {"seam", 1.5}}, 400, "seam"},
      {json{{"text", "a"}, {"model", "gpt-9"}}, 404, "model"},
      {json{{"text", std::string(5000, 'y')}}, 413, ""},
  };
  for (const auto& b : bad_segs) {
    e = post(c, "/v1/segments", b.body, &st);
    EXPECT_EQ(st, b.status) << b.body.dump().substr(0, 80) << " -> " << e.dump();
    if (st == 413) continue;  // httplib's own limit may answer first
    EXPECT_EQ(e["error"]["param"], b.param.empty() ? json(nullptr) : json(b.param)) << b.body.dump().substr(0, 80);
    EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  }
  for (const std::string& id : std::vector<std::string>{"seg_0123456789abcdef0123456789abcdef", "nope", "seg_%00", "..", std::string(200, 'z')}) {
    e = get(c, "/v1/segments/" + id, &st);
    EXPECT_EQ(st, 404) << id;
    EXPECT_TRUE(e.contains("error")) << id;
    e = del(c, "/v1/segments/" + id, &st);
    EXPECT_EQ(st, 404) << id;
  }
  e = get(c, "/v1/segments/seg_x?cache_salt=" + std::string(300, 's'), &st);
  EXPECT_EQ(st, 400);
  EXPECT_EQ(e["error"]["param"], "cache_salt");
  e = post(c, "/v1/chat/completions", parts_body(json::array({ref("seg_0123456789abcdef0123456789abcdef")}), ""), &st);
  EXPECT_EQ(st, 404);
  EXPECT_EQ(e["error"]["code"], "segment_not_found");
  EXPECT_EQ(e["error"]["param"], "messages[0].content[0].segment_id");
  e = post(c, "/v1/chat/completions", parts_body(json::array({json{{"type", "segment"}, {"segment_id", 12}}}), ""), &st);
  EXPECT_EQ(st, 400);
  EXPECT_EQ(e["error"]["param"], "messages[0].content[0].segment_id");
  e = post(c, "/v1/chat/completions", parts_body(json::array({json{{"type", "segment"}}}), ""), &st);
  EXPECT_EQ(st, 400);
  // Registered, deleted twice, then referenced.
  json reg = post(c, "/v1/segments", json{{"text", "short"}}, &st);
  ASSERT_EQ(st, 200) << reg.dump();
  const std::string id = reg["id"];
  e = del(c, "/v1/segments/" + id, &st);
  EXPECT_EQ(st, 200);
  e = del(c, "/v1/segments/" + id, &st);
  EXPECT_EQ(st, 404);
  EXPECT_EQ(e["error"]["code"], "segment_not_found");
  e = post(c, "/v1/chat/completions", parts_body(json::array({ref(id)}), ""), &st);
  EXPECT_EQ(st, 404);
  e = post(c, "/v1/chat/completions", chat_body(2), &st);
  EXPECT_EQ(st, 200) << e.dump();
}

TEST_F(HttpTest, ClientDisconnectCancelsAndServerKeepsServing) {
  ServerOptions o = opts();
  o.scheduler.max_queue = 0;
  Running s(*model_, *tok_, o);
  auto c = s.client();
  json b = chat_body(2000);
  b["stream"] = true;
  int chunks = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = b.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
  auto r = c.send(req);
  EXPECT_GE(chunks, 1);
  // The worker notices on its next piece and frees itself; with max_queue 0 a new request
  // is admitted only once it has.
  int st = 0;
  for (int i = 0; i < 200; ++i) {
    post(c, "/v1/chat/completions", chat_body(1), &st);
    if (st != 429) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(st, 200);
}

TEST_F(HttpTest, RegisteredSegmentsAreUsedByIdAndIsolatedByTenant) {
  Running s(*model_, *tok_, opts());
  auto c = s.client();
  int st = 0;
  const std::string text = doc("rivers and lakes");
  json reg = post(c, "/v1/segments", json{{"text", text}, {"cache_salt", "A"}, {"model", "tiny"}}, &st);
  ASSERT_EQ(st, 200) << reg.dump();
  const std::string id = reg["id"];
  EXPECT_EQ(id.rfind("seg_", 0), 0u);
  EXPECT_EQ(reg["object"], "segment");
  EXPECT_EQ(reg["tokens"], int64_t(tok_->encode(text, false).size()));
  EXPECT_EQ(reg["cached"], true);
  EXPECT_GT(reg["bytes"].get<int64_t>(), 0);
  EXPECT_EQ(reg["seam"], 8);
  EXPECT_GT(reg["created"].get<int64_t>(), 0);
  EXPECT_TRUE(reg["expires_at"].is_null());

  // Referenced by id: its pinned entry is a hit.
  json by_ref = post(c, "/v1/chat/completions",
                     parts_body(json::array({ref(id), inline_seg(doc("mountains"))}), "A"), &st);
  ASSERT_EQ(st, 200) << by_ref.dump();
  EXPECT_EQ(by_ref["usage"]["hypic"]["segments_hit"], 1);
  EXPECT_EQ(by_ref["usage"]["hypic"]["segments_missed"], 1);
  EXPECT_GT(by_ref["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), 0);
  // The same text inline is the same segment: same entry, same answer.
  json by_text = post(c, "/v1/chat/completions",
                      parts_body(json::array({inline_seg(text), inline_seg(doc("mountains"))}), "A"), &st);
  ASSERT_EQ(st, 200) << by_text.dump();
  EXPECT_EQ(by_text["usage"]["hypic"]["segments_hit"], 2);
  EXPECT_EQ(by_text["choices"][0]["message"]["content"], by_ref["choices"][0]["message"]["content"]);
  EXPECT_EQ(by_text["usage"]["prompt_tokens"], by_ref["usage"]["prompt_tokens"]);

  // Another tenant (or none) gets exactly the unknown-id answer.
  json other = post(c, "/v1/chat/completions", parts_body(json::array({ref(id)}), "B"), &st);
  EXPECT_EQ(st, 404);
  const std::string fake = "seg_" + std::string(32, '0');
  json unknown = post(c, "/v1/chat/completions", parts_body(json::array({ref(fake)}), "A"), &st);
  EXPECT_EQ(st, 404);
  auto scrub = [](json e, const std::string& sid) {
    std::string m = e["error"]["message"];
    m.replace(m.find(sid), sid.size(), "ID");
    e["error"]["message"] = m;
    return e;
  };
  EXPECT_EQ(scrub(other, id), scrub(unknown, fake));
  EXPECT_EQ(other["error"]["code"], "segment_not_found");
  post(c, "/v1/chat/completions", parts_body(json::array({ref(id)}), ""), &st);
  EXPECT_EQ(st, 404);

  // GET / list / DELETE are per tenant too.
  json g = get(c, "/v1/segments/" + id + "?cache_salt=A", &st);
  EXPECT_EQ(st, 200);
  EXPECT_EQ(g, reg);
  get(c, "/v1/segments/" + id, &st);
  EXPECT_EQ(st, 404);
  get(c, "/v1/segments/" + id + "?cache_salt=B", &st);
  EXPECT_EQ(st, 404);
  json short_reg = post(c, "/v1/segments", json{{"text", "Hi"}, {"cache_salt", "A"}, {"ttl", 3600}}, &st);
  ASSERT_EQ(st, 200) << short_reg.dump();
  EXPECT_EQ(short_reg["cached"], false);  // too short for an entry: recomputed when used
  EXPECT_EQ(short_reg["bytes"], 0);
  EXPECT_EQ(short_reg["expires_at"], short_reg["created"].get<int64_t>() + 3600);
  json l = get(c, "/v1/segments?cache_salt=A", &st);
  ASSERT_EQ(st, 200);
  EXPECT_EQ(l["object"], "list");
  ASSERT_EQ(l["data"].size(), 2u);
  EXPECT_EQ(l["data"][0]["id"], id);
  EXPECT_EQ(l["data"][1]["id"], short_reg["id"]);
  EXPECT_TRUE(get(c, "/v1/segments?cache_salt=B", &st)["data"].empty());
  EXPECT_TRUE(get(c, "/v1/segments", &st)["data"].empty());
  json short_use = post(c, "/v1/chat/completions",
                        parts_body(json::array({ref(short_reg["id"]), ref(id)}), "A"), &st);
  ASSERT_EQ(st, 200) << short_use.dump();
  EXPECT_EQ(short_use["usage"]["hypic"]["segments_hit"], 1);

  del(c, "/v1/segments/" + id + "?cache_salt=B", &st);
  EXPECT_EQ(st, 404);
  json d = del(c, "/v1/segments/" + id + "?cache_salt=A", &st);
  EXPECT_EQ(st, 200);
  EXPECT_EQ(d, (json{{"id", id}, {"object", "segment.deleted"}, {"deleted", true}}));
  del(c, "/v1/segments/" + id + "?cache_salt=A", &st);
  EXPECT_EQ(st, 404);
  get(c, "/v1/segments/" + id + "?cache_salt=A", &st);
  EXPECT_EQ(st, 404);
  post(c, "/v1/chat/completions", parts_body(json::array({ref(id)}), "A"), &st);
  EXPECT_EQ(st, 404);
}

TEST_F(HttpTest, SegmentTtlExpires) {
  Running s(*model_, *tok_, opts());
  auto c = s.client();
  int st = 0;
  json reg = post(c, "/v1/segments", json{{"text", doc("time")}, {"ttl", 1}}, &st);
  ASSERT_EQ(st, 200) << reg.dump();
  EXPECT_EQ(reg["expires_at"], reg["created"].get<int64_t>() + 1);
  EXPECT_EQ(metric(metrics_text(c), "hypic_registered_segments"), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  json e = get(c, "/v1/segments/" + reg["id"].get<std::string>(), &st);
  EXPECT_EQ(st, 404);
  EXPECT_EQ(e["error"]["code"], "segment_not_found");
  EXPECT_EQ(metric(metrics_text(c), "hypic_registered_segments"), 0);
  post(c, "/v1/chat/completions", parts_body(json::array({ref(reg["id"])}), ""), &st);
  EXPECT_EQ(st, 404);
}

TEST_F(HttpTest, RegistrationsCannotExhaustTheCache) {
  ServerOptions o = opts();
  o.registered_mem_bytes = 1;  // no entry fits
  o.max_registered_segments = 2;
  Running s(*model_, *tok_, o);
  auto c = s.client();
  int st = 0;
  json e = post(c, "/v1/segments", json{{"text", doc("space")}}, &st);
  EXPECT_EQ(st, 507) << e.dump();
  EXPECT_EQ(e["error"]["code"], "segment_capacity_exceeded");
  post(c, "/v1/segments", json{{"text", "a"}}, &st);  // short: pins nothing
  EXPECT_EQ(st, 200);
  post(c, "/v1/segments", json{{"text", "b"}}, &st);
  EXPECT_EQ(st, 200);
  e = post(c, "/v1/segments", json{{"text", "c"}}, &st);
  EXPECT_EQ(st, 507);
  EXPECT_EQ(e["error"]["code"], "segment_capacity_exceeded");
  EXPECT_EQ(metric(metrics_text(c), "hypic_registered_segment_bytes"), 0);
  e = post(c, "/v1/chat/completions", chat_body(1), &st);
  EXPECT_EQ(st, 200) << e.dump();
}

TEST_F(HttpTest, MetricsFollowRequests) {
  Running s(*model_, *tok_, opts());
  auto c = s.client();
  int st = 0;
  const std::string m0 = metrics_text(c);
  EXPECT_EQ(metric(m0, "hypic_requests_total{status=\"200\"}"), 0);
  EXPECT_EQ(metric(m0, "hypic_queue_depth"), 0);
  EXPECT_EQ(metric(m0, "hypic_running_requests"), 0);
  EXPECT_EQ(metric(m0, "hypic_cache_entries"), 0);
  for (const char* name : {"hypic_ttft_seconds_count", "hypic_inter_token_latency_seconds_count",
                           "hypic_prompt_tokens_total", "hypic_generation_tokens_total",
                           "hypic_tokens_reused_total", "hypic_tokens_recomputed_total",
                           "hypic_seam_tokens_total", "hypic_segment_hits_total",
                           "hypic_segment_misses_total", "hypic_cache_bytes", "hypic_cache_evictions_total",
                           "hypic_registered_segments"})
    EXPECT_NE(m0.find(std::string("\n") + name + " "), std::string::npos) << name;

  json a = post(c, "/v1/chat/completions", seg_body("m"), &st);
  ASSERT_EQ(st, 200) << a.dump();
  json sb = seg_body("m");
  sb["stream"] = true;
  sb["max_tokens"] = 6;
  auto r = c.Post("/v1/chat/completions", sb.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  post(c, "/v1/chat/completions", bad_model_body(), &st);
  EXPECT_EQ(st, 404);
  post(c, "/v1/segments", json{{"text", doc("metrics")}}, &st);
  ASSERT_EQ(st, 200);

  std::string m1;
  for (int i = 0; i < 100; ++i) {  // the streamed request is counted just after its last write
    m1 = metrics_text(c);
    if (metric(m1, "hypic_requests_total{status=\"200\"}") == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(metric(m1, "hypic_requests_total{status=\"200\"}"), 2);
  EXPECT_EQ(metric(m1, "hypic_requests_total{status=\"404\"}"), 1);
  EXPECT_EQ(metric(m1, "hypic_ttft_seconds_count"), 2);
  EXPECT_EQ(metric(m1, "hypic_ttft_seconds_bucket{le=\"+Inf\"}"), 2);
  EXPECT_GT(metric(m1, "hypic_ttft_seconds_sum"), 0);
  const int64_t p1 = a["usage"]["prompt_tokens"];
  EXPECT_EQ(metric(m1, "hypic_prompt_tokens_total"), 2 * p1);
  EXPECT_GE(metric(m1, "hypic_generation_tokens_total"), a["usage"]["completion_tokens"].get<double>());
  EXPECT_EQ(metric(m1, "hypic_segment_misses_total"), 2);
  EXPECT_EQ(metric(m1, "hypic_segment_hits_total"), 2);
  EXPECT_GT(metric(m1, "hypic_tokens_reused_total"), 0);
  EXPECT_GT(metric(m1, "hypic_tokens_recomputed_total"), 0);
  EXPECT_GT(metric(m1, "hypic_seam_tokens_total"), 0);
  // The warm request reused both bodies: at most the two requests' prompts minus the cold one's work.
  EXPECT_LE(metric(m1, "hypic_tokens_reused_total") + metric(m1, "hypic_tokens_recomputed_total"),
            metric(m1, "hypic_prompt_tokens_total"));
  EXPECT_EQ(metric(m1, "hypic_cache_entries"), 3);  // two documents and the registered one
  EXPECT_GT(metric(m1, "hypic_cache_bytes"), 0);
  EXPECT_EQ(metric(m1, "hypic_registered_segments"), 1);
  EXPECT_GT(metric(m1, "hypic_registered_segment_bytes"), 0);
  EXPECT_GT(metric(m1, "hypic_cache_pinned_bytes"), 0);
  EXPECT_EQ(metric(m1, "hypic_queue_depth"), 0);
  EXPECT_EQ(metric(m1, "hypic_running_requests"), 0);
}

TEST_F(HttpTest, NonStreamingClientDisconnectCancels) {
  ServerOptions o = opts();
  o.scheduler.workers = 1;
  o.scheduler.max_batch = 1;
  o.scheduler.max_queue = 0;
  o.debug_delay_ms = 600;  // the client gives up while the job waits
  Running s(*model_, *tok_, o);
  {
    auto impatient = s.client();
    impatient.set_read_timeout(0, 200000);
    auto r = impatient.Post("/v1/chat/completions", chat_body(50).dump(), "application/json");
    EXPECT_FALSE(r);  // timed out; the connection is closed
  }
  auto c = s.client();
  std::string m;
  for (int i = 0; i < 100; ++i) {
    m = metrics_text(c);
    if (metric(m, "hypic_requests_total{status=\"499\"}") == 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(metric(m, "hypic_requests_total{status=\"499\"}"), 1) << m;
  EXPECT_EQ(metric(m, "hypic_prompt_tokens_total"), 0);  // stopped before its prefill
  EXPECT_EQ(metric(m, "hypic_generation_tokens_total"), 0);
  int st = 0;
  post(c, "/v1/chat/completions", chat_body(1), &st);
  EXPECT_EQ(st, 200);
}

TEST_F(HttpTest, NonStreamingClientDisconnectStopsDecoding) {
  ServerOptions o = opts();
  o.scheduler.workers = 1;
  o.scheduler.max_batch = 1;
  o.scheduler.max_queue = 0;
  o.debug_piece_delay_ms = 20;  // decoding 100 tokens takes 2 s or more
  Running s(*model_, *tok_, o);
  const json b = chat_body(100);  // greedy, it runs to the length limit (no EOS before 134)
  {
    auto impatient = s.client();
    impatient.set_read_timeout(0, 300000);
    auto r = impatient.Post("/v1/chat/completions", b.dump(), "application/json");
    EXPECT_FALSE(r);
  }
  auto c = s.client();
  std::string m;
  for (int i = 0; i < 500; ++i) {
    m = metrics_text(c);
    if (metric(m, "hypic_requests_total{status=\"499\"}") + metric(m, "hypic_requests_total{status=\"200\"}") >= 1) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(metric(m, "hypic_requests_total{status=\"499\"}"), 1) << m;
  EXPECT_GT(metric(m, "hypic_generation_tokens_total"), 0);  // stopped while decoding
  EXPECT_LT(metric(m, "hypic_generation_tokens_total"), 100);
  int st = 0;
  post(c, "/v1/chat/completions", chat_body(1), &st);
  EXPECT_EQ(st, 200);
}

// stop() (SIGTERM) with a drain deadline: a stream still running at the deadline ends with
// what it produced — a finish chunk with finish_reason "abort", the usage, an error event
// (shutting_down), [DONE] — and stop() returns; a request after the drain began gets 503.
TEST_F(HttpTest, DrainDeadlineCutsStreams) {
  ServerOptions o = opts();
  // The greedy story ends at its EOS after 134 tokens; at 100 ms a piece that takes 13 s or
  // more, so the deadline comes first. The drain is long enough that the prober below sees
  // it even on a loaded machine (it polls until it sees 503 or the server closes).
  o.debug_piece_delay_ms = 100;
  o.drain_timeout_ms = 4000;
  o.port = 0;
  o.log_requests = false;
  auto created = HttpServer::create(*model_, *tok_, o);
  ASSERT_TRUE(created.is_ok()) << created.status().to_string();
  std::unique_ptr<HttpServer> srv = std::move(created).value();
  ASSERT_TRUE(srv->bind().is_ok());
  std::thread run([&] { srv->run(); });
  httplib::Client c("127.0.0.1", srv->port());
  c.set_read_timeout(60, 0);
  json b = chat_body(2000);
  b["stream"] = true;
  b["stream_options"] = {{"include_usage", true}};
  std::string body;
  std::atomic<bool> flowing{false};
  std::thread stopper, prober;
  int during_drain = 0;  // the status a new request got while the stream drained
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = b.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
    body.append(d, n);
    // The role chunk goes out when the request is admitted (its job may still be queued);
    // a second event is generated text: the sequence is decoding, stop now.
    size_t events_in = 0;
    for (size_t p = body.find("\n\n"); p != std::string::npos; p = body.find("\n\n", p + 2))
      ++events_in;
    if (events_in < 2 || flowing.exchange(true)) return true;
    stopper = std::thread([&] { srv->stop(); });
    prober = std::thread([&] {  // the drain lasts 4 s; it begins at once
      while (during_drain != 503) {
        httplib::Client p("127.0.0.1", srv->port());
        auto h = p.Get("/health");
        if (!h) break;  // the server has closed
        during_drain = h->status;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
    return true;
  };
  auto r = c.send(req);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  ASSERT_TRUE(stopper.joinable());
  stopper.join();
  prober.join();
  run.join();
  EXPECT_EQ(during_drain, 503);
  std::vector<json> events;
  for (size_t p = 0; p < body.size();) {
    const size_t e = body.find("\n\n", p);
    ASSERT_NE(e, std::string::npos) << body.substr(p);
    const std::string ev = body.substr(p, e - p);
    ASSERT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    events.push_back(ev == "data: [DONE]" ? json("[DONE]") : json::parse(ev.substr(6)));
    p = e + 2;
  }
  ASSERT_GE(events.size(), 5u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json& err = events[events.size() - 2];
  EXPECT_EQ(err["error"]["code"], "shutting_down") << err.dump();
  const json& usage = events[events.size() - 3];
  EXPECT_TRUE(usage["choices"].empty());
  const int64_t produced = usage["usage"]["completion_tokens"];
  EXPECT_GT(produced, 0);
  EXPECT_LT(produced, 2000);
  EXPECT_EQ(events[events.size() - 4]["choices"][0]["finish_reason"], "abort");
}

}  // namespace
}  // namespace hypic::server
