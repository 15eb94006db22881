#include "core/profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"

namespace hypic {
namespace {

struct Table {
  std::mutex mu;
  std::map<std::string, std::pair<double, long>> rows;
  ~Table() {
    if (rows.empty()) return;
    std::vector<std::pair<std::string, std::pair<double, long>>> v(rows.begin(), rows.end());
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second.first > b.second.first; });
    std::fprintf(stderr, "hypic profile (inclusive wall time):\n");
    for (auto& [name, tc] : v)
      std::fprintf(stderr, "  %-28s %10.3f s  %8ld calls\n", name.c_str(), tc.first, tc.second);
  }
};

Table& table() {
  static Table t;
  return t;
}

}  // namespace

bool profiling_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("HYPIC_PROFILE");
    return e && *e && std::string(e) != "0";
  }();
  return on;
}

void profile_add(const char* name, double seconds) {
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  auto& r = t.rows[name];
  r.first += seconds;
  r.second += 1;
}

}  // namespace hypic
