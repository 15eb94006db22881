#include "bench/eval_tools.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>

#include "api/auto_segments.h"
#include "api/request.h"
#include "api/request_tools.h"
#include "api/tool_calls.h"
#include "bench/eval_run.h"
#include "core/text.h"
#include "core/timer.h"
#include "engine/eval_task.h"
#include "model/model.h"
#include "server/engine_request.h"
#include "tokenizer/tokenizer.h"

namespace hypic::bench {
namespace {

using OJson = nlohmann::ordered_json;

constexpr const char* kTasks[] = {"tool_direct", "tool_doc", "tool_two", "no_tool"};

struct ToolRecord {
  std::string id, task, reply;
  OJson tools, messages, calls;  // key order kept: the tools are rendered as written
  std::vector<std::string> results;
};

Result<std::vector<ToolRecord>> load_tool_records(const std::string& path) {
  std::ifstream f(path);
  if (!f) return io_error("cannot read the task file '" + path + "'");
  std::vector<ToolRecord> out;
  std::string line;
  for (int no = 1; std::getline(f, line); ++no) {
    if (trim_space(line).empty()) continue;
    const std::string where = path + ":" + std::to_string(no) + ": ";
    const OJson j = OJson::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return invalid_argument(where + "not a JSON object");
    ToolRecord r;
    const std::string what = "not a tool-use record (tools/tiny/gen_tools.py): ";
    for (auto [k, d] : {std::pair{"id", &r.id}, {"task", &r.task}, {"reply", &r.reply}}) {
      if (!j.contains(k) || !j[k].is_string()) return invalid_argument(where + what + "missing string field '" + k + "'");
      *d = j[k].get<std::string>();
    }
    for (auto [k, d] : {std::pair{"tools", &r.tools}, {"messages", &r.messages}, {"calls", &r.calls}}) {
      if (!j.contains(k) || !j[k].is_array()) return invalid_argument(where + what + "missing array field '" + k + "'");
      *d = j[k];
    }
    if (!j.contains("results") || !j["results"].is_array() || j["results"].size() != r.calls.size())
      return invalid_argument(where + "'results' must be an array with one result per call");
    for (const auto& c : r.calls)
      if (!c.is_object() || !c.contains("name") || !c["name"].is_string() || !c.contains("arguments") ||
          !c["arguments"].is_object())
        return invalid_argument(where + "each call needs a string 'name' and an object 'arguments'");
    for (const auto& x : j["results"]) {
      if (!x.is_string()) return invalid_argument(where + "each result must be a string");
      r.results.push_back(x.get<std::string>());
    }
    out.push_back(std::move(r));
  }
  if (out.empty()) return invalid_argument("the task file '" + path + "' holds no records");
  return out;
}

OJson chat_body(const OJson& messages, const OJson& tools, int max_tokens) {
  return OJson{{"model", "eval"}, {"messages", messages}, {"tools", tools}, {"max_tokens", max_tokens},
               {"temperature", 0}};
}

// The conversation after the record's gold calls and their results.
OJson result_messages(const ToolRecord& r) {
  OJson m = r.messages, calls = OJson::array();
  for (size_t k = 0; k < r.calls.size(); ++k)
    calls.push_back({{"id", "call_" + std::to_string(k)},
                     {"type", "function"},
                     {"function", {{"name", r.calls[k]["name"]}, {"arguments", r.calls[k]["arguments"].dump()}}}});
  m.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", calls}});
  for (size_t k = 0; k < r.results.size(); ++k)
    m.push_back({{"role", "tool"}, {"tool_call_id", "call_" + std::to_string(k)}, {"content", r.results[k]}});
  return m;
}

// The tools in a new order, about a third of those the gold calls do not need left out.
OJson shuffled_subset(const ToolRecord& r, uint32_t seed) {
  std::mt19937 rng(seed);
  OJson keep = OJson::array();
  for (const auto& t : r.tools) {
    const std::string name = t["function"].value("name", "");
    const bool needed = std::any_of(r.calls.begin(), r.calls.end(), [&](const OJson& c) { return c["name"] == name; });
    if (needed || rng() % 3 != 0) keep.push_back(t);
  }
  std::vector<OJson> v(keep.begin(), keep.end());
  std::shuffle(v.begin(), v.end(), rng);
  return OJson(v);
}

// A request body as the server takes it: parsed, its tools as segments, laid out in the
// model's chat format. *r keeps the request (its tools and call markers read the reply).
Result<PromptParts> request_parts(const ChatTemplate& chat, const Tokenizer& tok, int64_t context,
                                  const OJson& body, api::ApiRequest* r) {
  const api::RequestLimits lim;
  auto fail = [](const api::ApiError& e) { return invalid_argument("the request is refused: " + e.message); };
  if (auto e = api::parse_request(body.dump(), api::Endpoint::kChat, lim, r)) return fail(*e);
  api::AutoSegments as;
  as.tools = true;
  if (auto e = api::apply_auto_segments(r, as, lim)) return fail(*e);
  if (auto e = api::request_grammar(chat, r)) return fail(*e);
  PromptParts parts;
  if (auto e = server::build_prompt(tok, chat, *r, context - r->max_tokens, &parts)) return fail(*e);
  return parts;
}

struct Reply {
  std::vector<api::ToolCall> calls;
  std::string content;
};

Reply read_reply(const api::ApiRequest& r, const std::string& text) {
  api::ToolCallReader reader(r.tool_call_open, r.tool_call_close, r.tools);
  Reply out;
  auto take = [&](std::vector<api::ToolCallReader::Event> events) {
    for (auto& e : events) {
      if (e.is_call) out.calls.push_back(std::move(e.call));
      else out.content += e.text;
    }
  };
  take(reader.feed(text));
  take(reader.finish(/*cut=*/false));
  return out;
}

struct Score {
  int n = 0;
  double name = 0, args = 0, valid = 0, no_call = 0, answer = 0;
  int agree = 0, agree_n = 0;  // first replies equal to full's (when full ran first)
  double ttft_cold_ms = 0, ttft_warm_ms = 0, ttft_result_ms = 0, reused_warm = 0;
  nlohmann::json to_json(bool calls) const {
    const double d = n > 0 ? n : 1;
    auto opt = [&](double v, bool on) { return on ? nlohmann::json(v / d) : nlohmann::json(nullptr); };
    return {{"n", n},
            {"name_accuracy", opt(name, calls)},
            {"args_accuracy", opt(args, calls)},
            {"valid_call_rate", opt(valid, calls)},
            {"no_call_rate", opt(no_call, !calls)},
            {"answer_accuracy", answer / d},
            {"agreement_with_full", agree_n > 0 ? nlohmann::json(double(agree) / agree_n) : nlohmann::json(nullptr)},
            {"ttft_cold_ms", ttft_cold_ms / d},
            {"ttft_warm_ms", ttft_warm_ms / d},
            {"ttft_result_ms", opt(ttft_result_ms, calls)},
            {"warm_reused_fraction", reused_warm / d}};
  }
};

}  // namespace

CallScore score_calls(const std::vector<api::ToolCall>& calls, const std::string& content, const OJson& gold) {
  // (name, arguments as compact JSON with sorted keys), sorted: compared as multisets.
  std::vector<std::pair<std::string, std::string>> got, want;
  for (const auto& c : calls) {
    const auto a = nlohmann::json::parse(c.arguments, nullptr, /*allow_exceptions=*/false);
    got.emplace_back(c.name, a.is_discarded() ? c.arguments : a.dump());
  }
  for (const auto& c : gold) want.emplace_back(c.value("name", ""), nlohmann::json::parse(c["arguments"].dump()).dump());
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  std::vector<std::string> got_names, want_names;
  for (const auto& k : got) got_names.push_back(k.first);
  for (const auto& k : want) want_names.push_back(k.first);
  CallScore s;
  s.names = got_names == want_names;
  s.args = got == want;
  const bool markup = content.find("<tool_call") != std::string::npos || content.find("<function=") != std::string::npos;
  s.valid = !calls.empty() && !markup;
  return s;
}

Result<nlohmann::json> run_tool_eval(const EvalOptions& o) {
  if (o.configs.empty()) return invalid_argument("no (mode, seam) to run");
  std::vector<std::string> tasks = o.tasks;
  if (tasks.empty()) tasks.assign(std::begin(kTasks), std::end(kTasks));
  for (const auto& t : tasks)
    if (std::find(std::begin(kTasks), std::end(kTasks), t) == std::end(kTasks))
      return invalid_argument("unknown tool task '" + t + "' (tool_direct, tool_doc, tool_two, no_tool)");
  auto all = load_tool_records(o.data);
  if (!all) return all.status();
  std::map<std::string, int> per_task;
  auto picked = first_per_task(std::move(all).value(), tasks, o, &per_task);
  if (!picked) return picked.status();
  const std::vector<ToolRecord>& records = *picked;
  auto loaded = load_eval_model(o);
  if (!loaded) return loaded.status();
  const Model& m = *loaded->model;
  const Tokenizer& tok = loaded->tok;
  const ChatTemplate& chat = model_chat_template(m.config());
  const int64_t context = m.config().max_position_embeddings;

  // Each record's three requests, laid out once: the requests read the replies.
  struct Prepared {
    api::ApiRequest req, result_req;
    PromptParts cold, warm, result;
  };
  std::vector<Prepared> prepared(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const ToolRecord& r = records[i];
    Prepared& p = prepared[i];
    api::ApiRequest warm_req;
    auto ctx = [&](const Status& s) { return s.with_context("record " + r.id); };
    auto cold = request_parts(chat, tok, context, chat_body(r.messages, r.tools, o.max_tokens), &p.req);
    if (!cold) return ctx(cold.status());
    auto warm = request_parts(chat, tok, context, chat_body(r.messages, shuffled_subset(r, uint32_t(i) + 1), o.max_tokens),
                              &warm_req);
    if (!warm) return ctx(warm.status());
    p.cold = std::move(cold).value();
    p.warm = std::move(warm).value();
    if (r.calls.empty()) continue;
    auto result = request_parts(chat, tok, context, chat_body(result_messages(r), r.tools, o.max_tokens), &p.result_req);
    if (!result) return ctx(result.status());
    p.result = std::move(result).value();
  }

  nlohmann::json results = nlohmann::json::array();
  std::vector<std::string> full_replies;  // per record, once full has run
  Timer total;
  for (size_t ci = 0; ci < o.configs.size(); ++ci) {
    const EvalConfig& c = o.configs[ci];
    RunOptions ro;
    ro.compose.mode = c.mode;
    ro.compose.seam = std::max(c.seam, 0);
    std::map<std::string, Score> scores;
    Timer tc;
    for (size_t i = 0; i < records.size(); ++i) {
      const ToolRecord& r = records[i];
      const Prepared& p = prepared[i];
      auto made = fresh_runner(m, o);  // fresh caches per record: "cold" is cold for its tools
      if (!made) return made.status();
      const Runner& runner = **made;
      auto ctx = [&](const Status& s) { return s.with_context("record " + r.id); };
      auto cold = eval_run_cold(runner, tok, p.cold, ro, o.max_tokens, {});
      if (!cold) return ctx(cold.status());
      auto warm = eval_run_warm(runner, tok, p.warm, ro);
      if (!warm) return ctx(warm.status());

      Score& s = scores[r.task];
      ++s.n;
      s.ttft_cold_ms += cold->ttft_ms;
      s.ttft_warm_ms += warm->ttft_ms;
      s.reused_warm += warm->reused_fraction;
      const Reply reply = read_reply(p.req, cold->text);
      if (c.mode == PicMode::kFull) full_replies.push_back(cold->text);
      else if (full_replies.size() == records.size()) {
        ++s.agree_n;
        s.agree += cold->text == full_replies[i] ? 1 : 0;
      }
      if (r.calls.empty()) {
        s.no_call += reply.calls.empty() ? 1 : 0;
        s.answer += reply.calls.empty() && normalize_answer(reply.content) == normalize_answer(r.reply) ? 1 : 0;
      } else {
        const CallScore cs = score_calls(reply.calls, reply.content, r.calls);
        s.name += cs.names ? 1 : 0;
        s.args += cs.args ? 1 : 0;
        s.valid += cs.valid ? 1 : 0;
        auto after = eval_run_cold(runner, tok, p.result, ro, o.max_tokens, {});
        if (!after) return ctx(after.status());
        s.ttft_result_ms += after->ttft_ms;
        const Reply final_reply = read_reply(p.result_req, after->text);
        s.answer += final_reply.calls.empty() && normalize_answer(final_reply.content) == normalize_answer(r.reply) ? 1 : 0;
      }
      if ((i + 1) % 25 == 0 || i + 1 == records.size()) {
        int calling = 0;
        double args = 0;
        for (const auto& [t, sc] : scores)
          if (t != "no_tool") calling += sc.n, args += sc.args;
        std::fprintf(stderr, "hypic eval: [%zu/%zu %s] %zu/%zu records, exact arguments %.3f, %.0f s\n", ci + 1,
                     o.configs.size(), eval_config_name(c).c_str(), i + 1, records.size(),
                     calling ? args / calling : 0.0, total.ms() / 1000);
      }
    }
    nlohmann::json per_task;
    double name = 0, args = 0, valid = 0, answer = 0;
    int calling = 0, agree = 0, agree_n = 0;
    for (const auto& [t, sc] : scores) {
      const bool calls = t != "no_tool";
      per_task[t] = sc.to_json(calls);
      answer += sc.answer / sc.n / double(scores.size());
      agree += sc.agree;
      agree_n += sc.agree_n;
      if (!calls) continue;
      ++calling;
      name += sc.name / sc.n;
      args += sc.args / sc.n;
      valid += sc.valid / sc.n;
    }
    const double d = calling ? calling : 1;
    results.push_back({{"mode", pic_mode_name(c.mode)},
                       {"seam", c.seam >= 0 ? nlohmann::json(c.seam) : nlohmann::json(nullptr)},
                       {"tasks", per_task},
                       {"mean_name_accuracy", name / d},
                       {"mean_args_accuracy", args / d},
                       {"mean_valid_call_rate", valid / d},
                       {"mean_answer_accuracy", answer},
                       {"agreement_with_full", agree_n > 0 ? nlohmann::json(double(agree) / agree_n) : nlohmann::json(nullptr)},
                       {"seconds", tc.ms() / 1000}});
  }
  const nlohmann::json* full = nullptr;
  for (const auto& r : results)
    if (r["mode"] == "full") full = &r;
  if (full) {
    const nlohmann::json f = *full;
    for (auto& r : results)
      for (const char* k : {"name", "args", "answer"}) {
        const std::string key = std::string("mean_") + k + "_accuracy";
        r[std::string("points_vs_full_") + k] = 100 * (r[key].get<double>() - f[key].get<double>());
      }
  }
  return eval_document(o, per_task, std::move(results));
}

}  // namespace hypic::bench
