// The router's view of its cluster: members (instances that run requests, workers that
// build segment entries), their health and load, and where segments were sent (cache
// affinity). Pure bookkeeping, no I/O: Router feeds it probe results, joins and leaves, and
// asks it where to send each request. Thread-safe (one mutex; every method is short).
//
// Choosing an instance (cache affinity by rendezvous hashing, load as a guard):
//   * candidates: healthy instances, not excluded (an earlier attempt failed), not full
//     (router in-flight < max_batch + max_queue as last reported);
//   * when the load is imbalanced (max − min in-flight > balance_abs and max > balance_rel ×
//     min), the least-loaded candidate;
//   * otherwise every segment has a home, the healthy instance with the highest
//     xxh64(segment key, address) (rendezvous hashing), and the request goes to the candidate
//     that is home to most of its bytes; ties to the least loaded, then round-robin.
// Homes partition the documents evenly over the instances, so each instance's cache holds its
// share rather than all of them, and they do not depend on history: a restarted router routes
// as before, and when an instance joins or leaves only the segments whose home it is move.
// (A learnt "where did it go" table was tried first: with several documents per request it
// drew nearly every request to whichever instance had served the first ones, 73 of 81 in a
// run with two instances, and each cache then churned as if alone.)
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace hypic::router {

enum class Role { kInstance, kWorker };
const char* role_name(Role r);

// A segment of a request as the router sees it: a hash of what identifies its cache entry
// (salt, seam, text) and its weight (text bytes).
struct SegKey {
  uint64_t hash = 0;
  int64_t weight = 0;
};

// How choose() picks among the candidates: by cache affinity (the default, described above),
// or — for comparison — ignoring it: the least loaded, or plain rotation.
enum class Routing { kAffinity, kLeastLoaded, kRoundRobin };
bool parse_routing(const std::string& s, Routing* out);

struct ClusterOptions {
  Routing routing = Routing::kAffinity;
  int balance_abs = 4;         // in-flight difference that counts as imbalanced ...
  double balance_rel = 1.5;    // ... when also max > this × min
  int fail_threshold = 2;      // failed probes in a row before a member is unhealthy
  // A joined member not heard from (heartbeat or probe) for this long is dropped; static
  // members (from the command line) are only marked unhealthy.
  std::chrono::milliseconds member_ttl{10000};
};

struct MemberState {
  std::string address;
  Role role = Role::kInstance;
  bool is_static = false;
  bool healthy = false;  // answered the last probe(s); a fresh member is healthy once probed
  int failures = 0;      // failed probes in a row
  int inflight = 0;      // requests the router has forwarded and not yet seen end
  int64_t forwarded = 0;
  // From the last successful probe.
  std::string model_name, fingerprint, dtype;
  int running = 0, queued = 0, capacity = 0;  // capacity: max_batch + max_queue (0: unknown)
  std::chrono::steady_clock::time_point last_seen{};
};

// A probe's result: ok with the member's identity and load, or failed.
struct ProbeResult {
  bool ok = false;
  std::string model_name, fingerprint, dtype;
  int running = 0, queued = 0, capacity = 0;
};

struct Choice {
  std::string address;
  int64_t affinity_bytes = 0;  // bytes of the request's segments whose home it is
  bool by_load = false;        // chosen for balance rather than affinity
};

class Cluster {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Cluster(ClusterOptions opt = {}) : opt_(opt) {}

  void add_static(Role role, const std::string& address);
  // A Join (first or heartbeat): adds the member or refreshes it.
  void join(Role role, const std::string& address, Clock::time_point now);
  // Removes a joined member, or marks a static one unhealthy. Returns false if unknown.
  bool leave(Role role, const std::string& address);
  // Members to probe now (all of them), and the results; drops expired joined members.
  std::vector<std::pair<Role, std::string>> members() const;
  void report(Role role, const std::string& address, const ProbeResult& r, Clock::time_point now);
  void expire(Clock::time_point now);

  // The instance for a request with these segments; none when no instance can take it
  // (`*busy` then says whether healthy ones exist but are all full or excluded).
  std::optional<Choice> choose(const std::vector<SegKey>& keys, const std::set<std::string>& exclude,
                               bool* busy = nullptr);
  // Forwarding began / ended on `address` (in-flight accounting).
  void begin(const std::string& address);
  void end(const std::string& address);
  // A forward failed to reach `address`: counts as a failed probe.
  void forward_failed(const std::string& address, Clock::time_point now);

  std::vector<std::string> healthy_workers() const;
  std::vector<MemberState> snapshot() const;
  // The model the healthy instances serve ("" when none has answered yet), and whether they
  // disagree (a misconfigured cluster).
  std::string model_name(bool* mixed = nullptr) const;

 private:
  using Key = std::pair<Role, std::string>;
  MemberState* find(Role role, const std::string& address);

  const ClusterOptions opt_;
  mutable std::mutex mu_;
  std::map<Key, MemberState> members_;
  uint64_t rr_ = 0;  // round-robin among equals
};

}  // namespace hypic::router
