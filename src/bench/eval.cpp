#include "bench/eval.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "bench/eval_run.h"
#include "core/timer.h"
#include "engine/eval_task.h"
#include "engine/prompt.h"
#include "engine/runner.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace hypic::bench {
namespace {

struct TaskScore {
  int n = 0;
  double exact = 0, f1 = 0, ttft_cold_ms = 0, ttft_warm_ms = 0, reused_warm = 0;
  double reply_nll = 0;            // Σ over records of the reference reply's mean NLL per token
  int agree = 0, agree_n = 0;      // answers equal to full's (when full ran)
  nlohmann::json to_json() const {
    const double d = n > 0 ? n : 1;
    return {{"n", n},
            {"exact_match", exact / d},
            {"f1", f1 / d},
            {"reply_nll", reply_nll / d},
            {"agreement_with_full", agree_n > 0 ? nlohmann::json(double(agree) / agree_n) : nlohmann::json(nullptr)},
            {"ttft_cold_ms", ttft_cold_ms / d},
            {"ttft_warm_ms", ttft_warm_ms / d},
            {"warm_reused_fraction", reused_warm / d}};
  }
};

}  // namespace

std::vector<EvalConfig> eval_configs(const std::vector<PicMode>& modes, const std::vector<int>& seams) {
  std::vector<EvalConfig> configs;
  for (PicMode mode : modes) {
    if (mode == PicMode::kFull || mode == PicMode::kPrefix) configs.push_back({mode, -1});
    else
      for (int s : seams) configs.push_back({mode, s});
  }
  return configs;
}

std::string eval_config_name(const EvalConfig& c) {
  return std::string(pic_mode_name(c.mode)) + (c.seam >= 0 ? " seam " + std::to_string(c.seam) : "");
}

Result<nlohmann::json> run_eval(const EvalOptions& o) {
  if (o.configs.empty()) return invalid_argument("no (mode, seam) to run");
  for (const auto& t : o.tasks)
    if (t != "single" && t != "two_hop" && t != "aggregate")
      return invalid_argument("unknown task '" + t + "' (single, two_hop, aggregate)");
  auto all = load_eval_records(o.data);
  if (!all) return all.status();
  std::map<std::string, int> per_task;
  auto picked = first_per_task(std::move(all).value(), o.tasks, o, &per_task);
  if (!picked) return picked.status();
  const std::vector<EvalRecord>& records = *picked;
  auto loaded = load_eval_model(o);
  if (!loaded) return loaded.status();
  const Model& m = *loaded->model;
  const Tokenizer& tok = loaded->tok;
  const ChatTemplate& chat = model_chat_template(m.config());

  std::vector<PromptParts> cold, warm;
  // "Answer: {reply}" and the template's turn end (ChatML's <|im_end|>), as gen_data renders it.
  std::vector<std::vector<int32_t>> replies;
  for (const auto& r : records) {
    replies.push_back(tok.encode("Answer: " + r.reply + chat.end_tokens().front(),
                                         /*parse_special=*/true));
    cold.push_back(chat_parts(chat, tok, r.system, r.segments, r.query));
    auto rotated = r.segments;
    std::rotate(rotated.begin(), rotated.begin() + 1, rotated.end());
    warm.push_back(chat_parts(chat, tok, r.system, rotated, r.query));
  }

  nlohmann::json results = nlohmann::json::array();
  std::vector<std::string> full_answers;  // normalised, per record, once full has run
  std::map<std::string, std::map<std::string, TaskScore>> table;  // config -> task -> score
  Timer total;
  for (size_t ci = 0; ci < o.configs.size(); ++ci) {
    const EvalConfig& c = o.configs[ci];
    auto made = fresh_runner(m, o);
    if (!made) return made.status();
    const Runner& runner = **made;
    RunOptions ro;
    ro.compose.mode = c.mode;
    ro.compose.seam = std::max(c.seam, 0);
    auto& scores = table[eval_config_name(c)];
    Timer tc;
    for (size_t i = 0; i < records.size(); ++i) {
      const EvalRecord& r = records[i];
      auto rc = eval_run_cold(runner, tok, cold[i], ro, o.max_tokens, replies[i]);
      if (!rc) return rc.status().with_context("record " + r.id);
      auto rw = eval_run_warm(runner, tok, warm[i], ro);
      if (!rw) return rw.status().with_context("record " + r.id);
      TaskScore& s = scores[r.task];
      ++s.n;
      s.exact += normalize_answer(rc->text) == normalize_answer(r.answer) ? 1 : 0;
      s.f1 += answer_f1(rc->text, r.answer);
      s.ttft_cold_ms += rc->ttft_ms;
      s.ttft_warm_ms += rw->ttft_ms;
      s.reused_warm += rw->reused_fraction;
      s.reply_nll += rc->reply_nll;
      if (c.mode == PicMode::kFull) full_answers.push_back(normalize_answer(rc->text));
      if (full_answers.size() == records.size()) {
        ++s.agree_n;
        s.agree += normalize_answer(rc->text) == full_answers[i] ? 1 : 0;
      }
      if ((i + 1) % 25 == 0 || i + 1 == records.size()) {
        int done = 0;
        double ex = 0;
        for (const auto& [t, sc] : scores) done += sc.n, ex += sc.exact;
        std::fprintf(stderr, "hypic eval: [%zu/%zu %s] %zu/%zu records, exact %.3f, %.0f s\n", ci + 1,
                     o.configs.size(), eval_config_name(c).c_str(), i + 1, records.size(), ex / done,
                     total.ms() / 1000);
      }
    }
    double mean_exact = 0, mean_f1 = 0, mean_nll = 0, mean_agree = 0;
    bool agreed = true;
    nlohmann::json per_task_json;
    for (const auto& [t, sc] : scores) {
      per_task_json[t] = sc.to_json();
      mean_exact += sc.exact / sc.n / double(scores.size());
      mean_f1 += sc.f1 / sc.n / double(scores.size());
      mean_nll += sc.reply_nll / sc.n / double(scores.size());
      if (sc.agree_n > 0) mean_agree += double(sc.agree) / sc.agree_n / double(scores.size());
      else agreed = false;
    }
    results.push_back({{"mode", pic_mode_name(c.mode)},
                       {"seam", c.seam >= 0 ? nlohmann::json(c.seam) : nlohmann::json(nullptr)},
                       {"tasks", per_task_json},
                       {"mean_exact_match", mean_exact},
                       {"mean_f1", mean_f1},
                       {"mean_reply_nll", mean_nll},
                       {"mean_agreement_with_full", agreed ? nlohmann::json(mean_agree) : nlohmann::json(nullptr)},
                       {"seconds", tc.ms() / 1000}});
  }
  // The paper's comparison: points lost against full, and the share of full's score lost.
  const nlohmann::json* full = nullptr;
  for (const auto& r : results)
    if (r["mode"] == "full") full = &r;
  if (full)
    for (auto& r : results) {
      const double f = (*full)["mean_exact_match"].get<double>(), v = r["mean_exact_match"].get<double>();
      r["points_vs_full"] = 100 * (v - f);
      r["relative_loss_vs_full"] = f > 0 ? (f - v) / f : 0.0;
    }
  return eval_document(o, per_task, std::move(results));
}

}  // namespace hypic::bench
