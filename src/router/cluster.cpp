#include "router/cluster.h"

#include <algorithm>

#include "core/hash.h"

namespace hypic::router {

const char* role_name(Role r) { return r == Role::kInstance ? "instance" : "worker"; }

bool parse_routing(const std::string& s, Routing* out) {
  if (s == "affinity") *out = Routing::kAffinity;
  else if (s == "least-loaded") *out = Routing::kLeastLoaded;
  else if (s == "round-robin") *out = Routing::kRoundRobin;
  else return false;
  return true;
}

MemberState* Cluster::find(Role role, const std::string& address) {
  auto it = members_.find({role, address});
  return it == members_.end() ? nullptr : &it->second;
}

void Cluster::add_static(Role role, const std::string& address) {
  std::lock_guard<std::mutex> l(mu_);
  MemberState& m = members_[{role, address}];
  m.address = address;
  m.role = role;
  m.is_static = true;
}

void Cluster::join(Role role, const std::string& address, Clock::time_point now) {
  std::lock_guard<std::mutex> l(mu_);
  MemberState& m = members_[{role, address}];
  m.address = address;
  m.role = role;
  m.last_seen = now;  // healthy only once a probe has answered (identity, load)
}

bool Cluster::leave(Role role, const std::string& address) {
  std::lock_guard<std::mutex> l(mu_);
  MemberState* m = find(role, address);
  if (!m) return false;
  if (m->is_static) m->healthy = false;
  else members_.erase({role, address});
  return true;
}

std::vector<std::pair<Role, std::string>> Cluster::members() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::pair<Role, std::string>> out;
  for (const auto& [k, m] : members_) out.push_back(k);
  return out;
}

void Cluster::report(Role role, const std::string& address, const ProbeResult& r, Clock::time_point now) {
  std::lock_guard<std::mutex> l(mu_);
  MemberState* m = find(role, address);
  if (!m) return;  // left while the probe ran
  if (!r.ok) {
    if (++m->failures >= opt_.fail_threshold) m->healthy = false;
    return;
  }
  m->failures = 0;
  m->healthy = true;
  m->last_seen = now;
  m->model_name = r.model_name;
  m->fingerprint = r.fingerprint;
  m->dtype = r.dtype;
  m->running = r.running;
  m->queued = r.queued;
  m->capacity = r.capacity;
}

void Cluster::expire(Clock::time_point now) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = members_.begin(); it != members_.end();) {
    MemberState& m = it->second;
    if (!m.is_static && m.inflight == 0 && now - m.last_seen > opt_.member_ttl) {
      it = members_.erase(it);
    } else {
      ++it;
    }
  }
}

std::optional<Choice> Cluster::choose(const std::vector<SegKey>& keys, const std::set<std::string>& exclude,
                                      bool* busy) {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<MemberState*> healthy, cand;
  for (auto& [k, m] : members_) {
    if (m.role != Role::kInstance || !m.healthy) continue;
    healthy.push_back(&m);
    if (!exclude.count(m.address) && (m.capacity == 0 || m.inflight < m.capacity)) cand.push_back(&m);
  }
  if (busy) *busy = !healthy.empty() && cand.empty();
  if (cand.empty()) return std::nullopt;
  // Round-robin among equals: rotate the candidates' order by a counter.
  std::rotate(cand.begin(), cand.begin() + std::ptrdiff_t(rr_++ % cand.size()), cand.end());
  if (opt_.routing == Routing::kRoundRobin) return Choice{cand.front()->address, 0, true};
  auto by_load = [](const MemberState* a, const MemberState* b) { return a->inflight < b->inflight; };
  const MemberState* least = *std::min_element(cand.begin(), cand.end(), by_load);
  const int lo = least->inflight, hi = (*std::max_element(cand.begin(), cand.end(), by_load))->inflight;
  if (opt_.routing == Routing::kLeastLoaded || (hi - lo > opt_.balance_abs && hi > opt_.balance_rel * lo))
    return Choice{least->address, 0, true};
  // Homes over all healthy instances (not just today's candidates), so that they stay put
  // while one instance is momentarily full.
  std::map<const MemberState*, int64_t> bytes;
  for (const SegKey& k : keys) {
    const MemberState* home = nullptr;
    uint64_t best = 0;
    for (const MemberState* m : healthy) {
      const uint64_t h = Xxh64::hash(m->address.data(), m->address.size(), k.hash);
      if (!home || h > best) home = m, best = h;
    }
    bytes[home] += k.weight;
  }
  const MemberState* pick = nullptr;
  int64_t pick_bytes = -1;
  for (const MemberState* m : cand) {
    const int64_t b = bytes.count(m) ? bytes[m] : 0;
    if (b > pick_bytes || (b == pick_bytes && m->inflight < pick->inflight)) pick = m, pick_bytes = b;
  }
  return Choice{pick->address, pick_bytes, false};
}

void Cluster::begin(const std::string& address) {
  std::lock_guard<std::mutex> l(mu_);
  if (MemberState* m = find(Role::kInstance, address)) {
    m->inflight += 1;
    m->forwarded += 1;
  }
}

void Cluster::end(const std::string& address) {
  std::lock_guard<std::mutex> l(mu_);
  if (MemberState* m = find(Role::kInstance, address)) m->inflight = std::max(0, m->inflight - 1);
}

void Cluster::forward_failed(const std::string& address, Clock::time_point) {
  std::lock_guard<std::mutex> l(mu_);
  if (MemberState* m = find(Role::kInstance, address)) {
    m->failures = std::max(m->failures + 1, opt_.fail_threshold);  // unhealthy until a probe answers
    m->healthy = false;
  }
}

std::vector<std::string> Cluster::healthy_workers() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> out;
  for (const auto& [k, m] : members_)
    if (m.role == Role::kWorker && m.healthy) out.push_back(m.address);
  return out;
}

std::vector<MemberState> Cluster::snapshot() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<MemberState> out;
  for (const auto& [k, m] : members_) out.push_back(m);
  return out;
}

std::string Cluster::model_name(bool* mixed) const {
  std::lock_guard<std::mutex> l(mu_);
  std::string name;
  bool mix = false;
  for (const auto& [k, m] : members_) {
    if (m.role != Role::kInstance || !m.healthy) continue;
    if (name.empty()) name = m.model_name;
    else if (m.model_name != name) mix = true;
  }
  if (mixed) *mixed = mix;
  return name;
}

}  // namespace hypic::router
