// End to end: the server on an ephemeral loopback port with tests/models/qwen3_5_dense,
// spoken to with httplib::Client.
#include <gtest/gtest.h>

#include <httplib.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/generate.h"
#include "server/http_server.h"

namespace hypic::server {
namespace {

using nlohmann::json;

class Running {
 public:
  Running(const Model& m, const Tokenizer& t, ServerOptions o) {
    o.port = 0;
    o.log_requests = false;
    auto s = HttpServer::create(m, t, std::move(o));
    if (!s) ADD_FAILURE() << s.status().to_string();
    srv_ = std::move(s).value();
    Status b = srv_->bind();
    if (!b) ADD_FAILURE() << b.to_string();
    th_ = std::thread([this] { srv_->run(); });
  }
  ~Running() {
    srv_->stop();
    th_.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", srv_->port());
    c.set_read_timeout(60, 0);
    return c;
  }

 private:
  std::unique_ptr<HttpServer> srv_;
  std::thread th_;
};

class HttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = std::string(HYPIC_SOURCE_DIR) + "/tests/models/qwen3_5_dense";
    auto m = Model::load(dir, {DType::kF32, false});
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    model_ = std::move(m).value().release();
    auto t = Tokenizer::load(dir + "/tokenizer.json");
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    tok_ = new Tokenizer(std::move(t).value());
  }
  static void TearDownTestSuite() {
    delete model_;
    delete tok_;
  }
  static ServerOptions opts() {
    ServerOptions o;
    o.model_name = "tiny";
    o.cache_mem_bytes = 64 << 20;
    return o;
  }
  static json chat_body(int max_tokens = 8) {
    return json{{"model", "tiny"},
                {"temperature", 0},
                {"max_tokens", max_tokens},
                {"hypic", {{"mode", "full"}}},
                {"messages", json::array({json{{"role", "system"}, {"content", "Be brief."}},
                                          json{{"role", "user"}, {"content", "Tell me a story"}}})}};
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
  static Model* model_;
  static Tokenizer* tok_;
};
Model* HttpTest::model_ = nullptr;
Tokenizer* HttpTest::tok_ = nullptr;

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
  ASSERT_FALSE(build_prompt(*tok_, r, 100000, &parts));
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
  EXPECT_GT(b["usage"]["hypic"]["seam_tokens"].get<int64_t>(), 0);
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
  post(c, "/v1/chat/completions", chat_body(1), &st, {{"Authorization", "Bearer sekrit"}});
  EXPECT_EQ(st, 200);
}

TEST_F(HttpTest, FullQueueGives429WithRetryAfter) {
  ServerOptions o = opts();
  o.scheduler.workers = 1;
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
  n2["n"] = 2;
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

}  // namespace
}  // namespace hypic::server
