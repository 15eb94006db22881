// Prometheus metrics without a client library: counters, a counter family with one label,
// fixed-bucket histograms, the text exposition format (version 0.0.4: "# HELP" / "# TYPE"
// lines, then samples), and the server's own metric set (GET /metrics).
//
// Threading: every method may be called from any thread. Counter is one atomic;
// LabeledCounter and Histogram each hold a small mutex (an increment or a copy under it),
// the only locks of the server outside the scheduler module besides the segment registry
// (STYLE "Serving code" allows these dedicated, self-contained ones). Recording is cheap
// enough to do per token.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cache/segment_store.h"
#include "core/timer.h"
#include "engine/compose.h"

namespace hypic::server {

class Counter {
 public:
  void inc(uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

// A counter per value of one label (e.g. status="200").
class LabeledCounter {
 public:
  void inc(const std::string& label_value, uint64_t n = 1);
  std::vector<std::pair<std::string, uint64_t>> values() const;  // sorted by label value
  uint64_t value(const std::string& label_value) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> v_;  // guarded by mu_
};

class Histogram {
 public:
  // `upper_bounds`: ascending, finite; a +Inf bucket is implied.
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // [bounds.size() + 1], the last one is +Inf (= count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // guarded by mu_: per bucket, not cumulative
  double sum_ = 0;                // guarded by mu_
  uint64_t count_ = 0;            // guarded by mu_
};

// Text exposition builder. Names must match [a-zA-Z_:][a-zA-Z0-9_:]*; label values are
// escaped; HELP text must be one line.
class Exposition {
 public:
  void counter(const std::string& name, const std::string& help, uint64_t value);
  void gauge(const std::string& name, const std::string& help, double value);
  void labeled_counter(const std::string& name, const std::string& help, const std::string& label,
                       const std::vector<std::pair<std::string, uint64_t>>& values);
  void histogram(const std::string& name, const std::string& help, const Histogram::Snapshot& s);
  const std::string& text() const { return out_; }
  static std::string number(double v);  // shortest round-trip form; +Inf, -Inf, NaN

 private:
  void header(const std::string& name, const std::string& help, const char* type);
  std::string out_;
};

// The server's metrics. Recording calls are small so the runner stays readable.
struct ServerMetrics {
  ServerMetrics();
  LabeledCounter requests;  // completion requests answered, by HTTP status
  Histogram ttft;           // seconds, arrival -> first token
  Histogram inter_token;    // seconds between consecutive streamed pieces of one request
  Counter prompt_tokens, generation_tokens;
  Counter reused_tokens, recomputed_tokens, seam_tokens;
  Counter segment_hits, segment_misses;

  void count_request(int http_status) { requests.inc(std::to_string(http_status)); }
  void record_compose(const ComposeStats& cs);
  void record_generation(int64_t tokens, double ttft_ms);  // ttft_ms < 0: no token came

  // Values read at scrape time from the parts that own them.
  struct Live {
    int queue_depth = 0, running = 0;
    size_t registered_segments = 0, registered_bytes = 0;
    std::optional<uint64_t> registry_forgot, registry_republished;  // shared records only
    SegmentStore::Stats cache;
    std::optional<RemoteTier::Stats> remote;  // with --segment-store
  };
  std::string render(const Live& live) const;
};

// Times the gaps between a request's streamed pieces into a histogram: call tick() per piece.
class InterTokenTimer {
 public:
  explicit InterTokenTimer(Histogram* h) : h_(h) {}
  void tick() {
    if (started_) h_->observe(t_.seconds());
    started_ = true;
    t_.reset();
  }

 private:
  Histogram* h_;
  Timer t_;
  bool started_ = false;
};

}  // namespace hypic::server
