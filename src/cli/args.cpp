#include "cli/args.h"

#include <cstdlib>
#include <sstream>

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

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

Result<std::vector<int>> int_list(const std::string& list, const std::string& flag, int lo, int hi) {
  std::vector<int> out;
  for (const auto& s : split_list(list)) {
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (*end != '\0' || v < lo || v > hi)
      return invalid_argument("--" + flag + " takes integers in [" + std::to_string(lo) + ", " +
                              std::to_string(hi) + "], got '" + s + "'");
    out.push_back(int(v));
  }
  return out;
}

Result<std::vector<std::string>> host_port_list(const std::string& list, const std::string& flag) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string w = list.substr(start, comma - start);
    if (w.find(':') == std::string::npos)
      return invalid_argument("--" + flag + " takes host:port entries, got '" + w + "'");
    out.push_back(w);
    start = comma + 1;
  }
  return out;
}

Result<std::string> advertised_address(const Args& a, const std::string& host, int port) {
  if (a.has("advertise")) {
    const std::string adv = a.str("advertise");
    if (adv.find(':') == std::string::npos) return invalid_argument("--advertise takes host:port, got '" + adv + "'");
    return adv;
  }
  if (host == "0.0.0.0" || host == "::" || host == "[::]")
    return invalid_argument("bound to the wildcard address " + host +
                            ": pass --advertise HOST:PORT, the address the router can reach this process at");
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace hypic::cli
