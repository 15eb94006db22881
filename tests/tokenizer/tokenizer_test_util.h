// Shared helpers for the tokenizer tests: paths to the golden data, file reading, loading.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tokenizer/tokenizer.h"

namespace hypic::testing {

inline std::string tok_data(const std::string& name) {
  return std::string(HYPIC_SOURCE_DIR) + "/tests/data/tokenizer/" + name;
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline const nlohmann::json& golden() {
  static const nlohmann::json j = nlohmann::json::parse(read_file(tok_data("golden.json")));
  return j;
}

inline const std::string& multilingual_text() {
  static const std::string s = read_file(tok_data("multilingual.txt"));
  return s;
}

// Lines as the generator splits them: on '\n' only (a CRLF line keeps its '\r').
inline std::vector<std::string> text_lines() {
  std::vector<std::string> lines;
  const std::string& t = multilingual_text();
  size_t start = 0;
  for (;;) {
    size_t nl = t.find('\n', start);
    if (nl == std::string::npos) {
      lines.push_back(t.substr(start));
      return lines;
    }
    lines.push_back(t.substr(start, nl - start));
    start = nl + 1;
  }
}

inline Tokenizer load_or_die(const std::string& path) {
  auto r = Tokenizer::load(path);
  if (!r.is_ok()) {
    ADD_FAILURE() << r.status().to_string();
    std::abort();
  }
  return std::move(r).value();
}

inline const Tokenizer& qwen_tokenizer() {
  static const Tokenizer t = load_or_die(tok_data("tokenizer.json"));
  return t;
}

inline std::vector<int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

}  // namespace hypic::testing
