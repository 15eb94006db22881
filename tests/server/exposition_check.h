// Test helper: a line-by-line checker of the Prometheus text exposition format (0.0.4).
#pragma once

#include <regex>
#include <sstream>
#include <string>

namespace hypic::server {

// Checks the text exposition format (0.0.4) line by line; returns "" or the first problem.
// Also checks that each sample belongs to the family of the last # TYPE line.
inline std::string check_exposition(const std::string& text) {
  static const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) [^\n]*)");
  static const std::regex type(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped))");
  static const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(\\[\\"n]|[^"\\\n])*"(,[a-zA-Z_][a-zA-Z0-9_]*="(\\[\\"n]|[^"\\\n])*")*\})? (NaN|[+-]Inf|[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?))");
  if (text.empty() || text.back() != '\n') return "must end with a newline";
  std::istringstream in(text);
  std::string line, family, kind;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::smatch m;
    if (std::regex_match(line, m, help)) continue;
    if (std::regex_match(line, m, type)) {
      family = m[1];
      kind = m[2];
      continue;
    }
    if (!std::regex_match(line, m, sample)) return "line " + std::to_string(n) + " is not a sample: " + line;
    const std::string name = m[1];
    bool ok = name == family;
    if (kind == "histogram")
      ok = name == family + "_bucket" || name == family + "_sum" || name == family + "_count";
    if (!ok) return "line " + std::to_string(n) + ": sample " + name + " outside its family " + family;
  }
  return "";
}

}  // namespace hypic::server
