#include "router/cluster.h"

#include <algorithm>

namespace hypic::router {

const char* role_name(Role r) { return r == Role::kInstance ? "instance" : "worker"; }

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
  if (role == Role::kInstance) drop_affinity(address);
  if (m->is_static) set_unhealthy(*m);
  else members_.erase({role, address});
  return true;
}

std::vector<std::pair<Role, std::string>> Cluster::members() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::pair<Role, std::string>> out;
  for (const auto& [k, m] : members_) out.push_back(k);
  return out;
}

void Cluster::set_unhealthy(MemberState& m) {
  if (m.healthy && m.role == Role::kInstance) drop_affinity(m.address);
  m.healthy = false;
}

void Cluster::report(Role role, const std::string& address, const ProbeResult& r, Clock::time_point now) {
  std::lock_guard<std::mutex> l(mu_);
  MemberState* m = find(role, address);
  if (!m) return;  // left while the probe ran
  if (!r.ok) {
    if (++m->failures >= opt_.fail_threshold) set_unhealthy(*m);
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
      if (m.role == Role::kInstance) drop_affinity(m.address);
      it = members_.erase(it);
    } else {
      ++it;
    }
  }
}

std::optional<Choice> Cluster::choose(const std::vector<SegKey>& keys, const std::set<std::string>& exclude,
                                      bool* busy) {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<MemberState*> cand;
  bool healthy = false;
  for (auto& [k, m] : members_) {
    if (m.role != Role::kInstance || !m.healthy) continue;
    healthy = true;
    if (!exclude.count(m.address) && (m.capacity == 0 || m.inflight < m.capacity)) cand.push_back(&m);
  }
  if (busy) *busy = healthy && cand.empty();
  if (cand.empty()) return std::nullopt;
  // Round-robin among equals: rotate the candidates' order by a counter.
  std::rotate(cand.begin(), cand.begin() + std::ptrdiff_t(rr_++ % cand.size()), cand.end());
  auto least = *std::min_element(cand.begin(), cand.end(),
                                 [](const MemberState* a, const MemberState* b) { return a->inflight < b->inflight; });
  const int lo = least->inflight;
  const int hi = (*std::max_element(cand.begin(), cand.end(), [](const MemberState* a, const MemberState* b) {
                   return a->inflight < b->inflight;
                 }))->inflight;
  if (hi - lo > opt_.balance_abs && hi > opt_.balance_rel * lo) return Choice{least->address, 0, true};
  std::map<std::string, int64_t> bytes;
  for (const SegKey& k : keys) {
    auto it = where_.find(k.hash);
    if (it == where_.end()) continue;
    for (const std::string& a : it->second.instances) bytes[a] += k.weight;
  }
  const MemberState* best = nullptr;
  int64_t best_bytes = -1;
  for (const MemberState* m : cand) {
    const int64_t b = bytes.count(m->address) ? bytes[m->address] : 0;
    if (b > best_bytes || (b == best_bytes && m->inflight < best->inflight)) {
      best = m;
      best_bytes = b;
    }
  }
  int64_t total = 0;
  for (const SegKey& k : keys) total += k.weight;
  if (best_bytes < opt_.min_affinity * double(total))
    return Choice{least->address, bytes.count(least->address) ? bytes[least->address] : 0, true};
  return Choice{best->address, best_bytes, false};
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
    set_unhealthy(*m);
  }
}

void Cluster::record(const std::string& address, const std::vector<SegKey>& keys) {
  std::lock_guard<std::mutex> l(mu_);
  if (opt_.max_keys == 0) return;
  for (const SegKey& k : keys) {
    auto it = where_.find(k.hash);
    if (it == where_.end()) {
      lru_.push_front(k.hash);
      it = where_.emplace(k.hash, Where{{}, lru_.begin()}).first;
    } else {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
    }
    auto& v = it->second.instances;
    if (std::find(v.begin(), v.end(), address) == v.end()) v.push_back(address);
  }
  while (where_.size() > opt_.max_keys) {
    where_.erase(lru_.back());
    lru_.pop_back();
  }
}

void Cluster::drop_affinity(const std::string& address) {
  for (auto it = where_.begin(); it != where_.end();) {
    auto& v = it->second.instances;
    v.erase(std::remove(v.begin(), v.end(), address), v.end());
    if (v.empty()) {
      lru_.erase(it->second.lru);
      it = where_.erase(it);
    } else {
      ++it;
    }
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

size_t Cluster::affinity_entries() const {
  std::lock_guard<std::mutex> l(mu_);
  return where_.size();
}

}  // namespace hypic::router
