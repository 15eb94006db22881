#include "cli/args.h"

#include <cstdlib>

namespace hypic::cli {

Args& Args::opt(const std::string& name, const std::string& value_name, const std::string& help,
                const std::string& default_value) {
  order_.push_back(name);
  opts_[name] = {value_name, help, default_value};
  return *this;
}

Status Args::parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      help_ = true;
      continue;
    }
    if (a.rfind("--", 0) != 0)
      return invalid_argument("unexpected argument '" + a + "'; see --help");
    std::string name = a.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = opts_.find(name);
    if (it == opts_.end()) return invalid_argument("unknown option --" + name + "; see --help");
    if (it->second.value_name.empty()) {
      if (has_value) return invalid_argument("--" + name + " takes no value");
      values_[name].push_back("1");
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) return invalid_argument("--" + name + " needs a value (" + it->second.value_name + ")");
      value = argv[++i];
    }
    values_[name].push_back(value);
  }
  return Status::ok();
}

std::string Args::help() const {
  std::string s = "usage: " + usage_ + "\n\n" + description_ + "\n\noptions:\n";
  for (const auto& n : order_) {
    const Opt& o = opts_.at(n);
    std::string left = "  --" + n + (o.value_name.empty() ? "" : " " + o.value_name);
    if (left.size() < 28) left.resize(28, ' ');
    else left += "\n" + std::string(28, ' ');
    s += left + o.help + (o.def.empty() ? "" : " (default: " + o.def + ")") + "\n";
  }
  s += "  -h, --help                show this help\n";
  return s;
}

std::string Args::str(const std::string& name) const {
  auto it = values_.find(name);
  if (it != values_.end()) return it->second.back();
  auto o = opts_.find(name);
  return o == opts_.end() ? std::string() : o->second.def;
}

std::vector<std::string> Args::all(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

Result<int64_t> Args::integer(const std::string& name) const {
  const std::string v = str(name);
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end) return invalid_argument("--" + name + " must be an integer, got '" + v + "'");
  return int64_t(x);
}

Result<double> Args::number(const std::string& name) const {
  const std::string v = str(name);
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end) return invalid_argument("--" + name + " must be a number, got '" + v + "'");
  return x;
}

}  // namespace hypic::cli
