#include "engine/eval_task.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/text.h"

namespace hypic {

namespace {

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ' ' || c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

}  // namespace

std::string normalize_answer(const std::string& in) {
  std::string s = in;
  for (size_t p; (p = s.find("<|im_end|>")) != std::string::npos;) s.erase(p, 10);
  s = std::string(trim_space(s));
  const std::string head = "Answer:";
  if (s.compare(0, head.size(), head) == 0) s.erase(0, head.size());
  std::string c;  // whitespace runs collapsed to one space
  bool space = false;
  for (char ch : trim_space(s)) {
    if (std::isspace(static_cast<unsigned char>(ch))) {
      space = true;
      continue;
    }
    if (space && !c.empty()) c += ' ';
    space = false;
    c += ch;
  }
  auto strip_periods = [](std::string v) {
    v = std::string(trim_space(v));
    while (!v.empty() && v.back() == '.') v.pop_back();
    return std::string(trim_space(v));
  };
  if (c.find(" is ") != std::string::npos) {  // restated facts: the value after each " is "
    std::string values;
    for (size_t b = 0;;) {
      const size_t e = c.find(". The ", b);
      const std::string part = c.substr(b, e == std::string::npos ? std::string::npos : e - b);
      const size_t is = part.rfind(" is ");
      if (b > 0) values += ", ";
      values += strip_periods(is == std::string::npos ? part : part.substr(is + 4));
      if (e == std::string::npos) break;
      b = e + 2;
    }
    c = values;
  }
  c = strip_periods(c);
  for (char& ch : c) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return c;
}

double answer_f1(const std::string& prediction, const std::string& gold) {
  const auto p = words(normalize_answer(prediction)), g = words(normalize_answer(gold));
  if (p.empty() || g.empty()) return p.empty() && g.empty() ? 1.0 : 0.0;
  std::map<std::string, int> count;
  for (const auto& w : g) ++count[w];
  int common = 0;
  for (const auto& w : p)
    if (count[w]-- > 0) ++common;
  if (common == 0) return 0.0;
  const double prec = double(common) / double(p.size()), rec = double(common) / double(g.size());
  return 2 * prec * rec / (prec + rec);
}

Result<std::vector<EvalRecord>> load_eval_records(const std::string& path) {
  std::ifstream f(path);
  if (!f) return io_error("cannot read the task file '" + path + "'");
  std::vector<EvalRecord> out;
  std::string line;
  for (int no = 1; std::getline(f, line); ++no) {
    if (trim_space(line).empty()) continue;
    const std::string where = path + ":" + std::to_string(no) + ": ";
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return invalid_argument(where + "not a JSON object");
    auto str = [&](const char* key, std::string* dst) -> Status {
      auto it = j.find(key);
      if (it == j.end() || !it->is_string())
        return invalid_argument(where + "missing string field '" + key + "'");
      *dst = it->get<std::string>();
      return Status::ok();
    };
    EvalRecord r;
    std::string question;
    for (auto [k, d] : {std::pair{"id", &r.id}, {"task", &r.task}, {"kind", &r.kind},
                        {"system", &r.system}, {"question", &question}, {"answer", &r.answer}})
      HYPIC_RETURN_IF_ERROR(str(k, d));
    r.reply = r.answer;
    if (j.contains("reply")) HYPIC_RETURN_IF_ERROR(str("reply", &r.reply));
    auto docs = j.find("documents");
    if (docs == j.end() || !docs->is_array() || docs->empty())
      return invalid_argument(where + "'documents' must be a non-empty array");
    for (const auto& d : *docs) {
      if (!d.is_object() || !d.contains("title") || !d["title"].is_string() ||
          !d.contains("text") || !d["text"].is_string())
        return invalid_argument(where + "each document needs string 'title' and 'text'");
      r.segments.push_back("Document: " + d["title"].get<std::string>() + "\n" +
                           d["text"].get<std::string>() + "\n\n");
    }
    r.query = "Question: " + question;
    out.push_back(std::move(r));
  }
  if (out.empty()) return invalid_argument("the task file '" + path + "' holds no records");
  return out;
}

}  // namespace hypic
