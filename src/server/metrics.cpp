#include "server/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace hypic::server {

void LabeledCounter::inc(const std::string& label_value, uint64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  v_[label_value] += n;
}

std::vector<std::pair<std::string, uint64_t>> LabeledCounter::values() const {
  std::lock_guard<std::mutex> lk(mu_);
  return {v_.begin(), v_.end()};
}

uint64_t LabeledCounter::value(const std::string& label_value) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = v_.find(label_value);
  return it == v_.end() ? 0 : it->second;
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  // Bucket i counts bounds_[i-1] < v <= bounds_[i] ("le" semantics); NaN goes to +Inf.
  const size_t i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  std::lock_guard<std::mutex> lk(mu_);
  ++counts_[std::isnan(v) ? bounds_.size() : i];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard<std::mutex> lk(mu_);
  s.cumulative.resize(counts_.size());
  uint64_t c = 0;
  for (size_t i = 0; i < counts_.size(); ++i) s.cumulative[i] = c += counts_[i];
  s.sum = sum_;
  s.count = count_;
  return s;
}

std::string Exposition::number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

namespace {

std::string escape_label(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\') o += "\\\\";
    else if (c == '"') o += "\\\"";
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}

}  // namespace

void Exposition::header(const std::string& name, const std::string& help, const char* type) {
  out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void Exposition::counter(const std::string& name, const std::string& help, uint64_t value) {
  header(name, help, "counter");
  out_ += name + " " + std::to_string(value) + "\n";
}

void Exposition::gauge(const std::string& name, const std::string& help, double value) {
  header(name, help, "gauge");
  out_ += name + " " + number(value) + "\n";
}

void Exposition::labeled_counter(const std::string& name, const std::string& help,
                                 const std::string& label,
                                 const std::vector<std::pair<std::string, uint64_t>>& values) {
  header(name, help, "counter");
  for (const auto& [lv, v] : values)
    out_ += name + "{" + label + "=\"" + escape_label(lv) + "\"} " + std::to_string(v) + "\n";
}

void Exposition::histogram(const std::string& name, const std::string& help,
                           const Histogram::Snapshot& s) {
  header(name, help, "histogram");
  for (size_t i = 0; i < s.cumulative.size(); ++i) {
    const std::string le = i < s.bounds.size() ? number(s.bounds[i]) : "+Inf";
    out_ += name + "_bucket{le=\"" + le + "\"} " + std::to_string(s.cumulative[i]) + "\n";
  }
  out_ += name + "_sum " + number(s.sum) + "\n";
  out_ += name + "_count " + std::to_string(s.count) + "\n";
}

ServerMetrics::ServerMetrics()
    : ttft({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      inter_token({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}) {}

void ServerMetrics::record_compose(const ComposeStats& cs) {
  prompt_tokens.inc(uint64_t(cs.prompt_tokens));
  reused_tokens.inc(uint64_t(cs.reused_tokens));
  recomputed_tokens.inc(uint64_t(cs.recomputed_tokens));
  seam_tokens.inc(uint64_t(cs.seam_tokens));
  segment_hits.inc(uint64_t(cs.segments_hit));
  segment_misses.inc(uint64_t(cs.segments_missed));
}

void ServerMetrics::record_generation(int64_t tokens, double ttft_ms) {
  generation_tokens.inc(uint64_t(std::max<int64_t>(tokens, 0)));
  if (ttft_ms >= 0) ttft.observe(ttft_ms / 1e3);
}

std::string ServerMetrics::render(const Live& live) const {
  Exposition e;
  e.labeled_counter("hypic_requests_total", "Completion requests answered, by HTTP status.",
                    "status", requests.values());
  e.histogram("hypic_ttft_seconds", "Time from a request's arrival to its first token.",
              ttft.snapshot());
  e.histogram("hypic_inter_token_latency_seconds",
              "Time between consecutive pieces of text of one request (streamed or not).",
              inter_token.snapshot());
  e.counter("hypic_prompt_tokens_total", "Prompt tokens of prefilled requests.", prompt_tokens.value());
  e.counter("hypic_generation_tokens_total", "Tokens generated.", generation_tokens.value());
  e.counter("hypic_tokens_reused_total", "Prompt tokens whose work came from a cache.",
            reused_tokens.value());
  e.counter("hypic_tokens_recomputed_total", "Prompt tokens run through the model.",
            recomputed_tokens.value());
  e.counter("hypic_seam_tokens_total", "Recomputed seam-window tokens of cached segments.",
            seam_tokens.value());
  e.counter("hypic_segment_hits_total", "Segments whose entry was cached.", segment_hits.value());
  e.counter("hypic_segment_misses_total", "Segments whose entry was built.", segment_misses.value());
  e.gauge("hypic_cache_bytes", "Bytes of segment entries held in memory.", double(live.cache.mem_bytes));
  e.gauge("hypic_cache_pinned_bytes", "Bytes of segment entries pinned by requests or registrations.",
          double(live.cache.pinned_bytes));
  e.gauge("hypic_cache_entries", "Segment entries held in memory.", double(live.cache.mem_entries));
  e.gauge("hypic_cache_disk_bytes", "Bytes of segment entry files in the disk tier.",
          double(live.cache.disk_bytes));
  e.counter("hypic_cache_evictions_total", "Segment entries evicted from memory.", live.cache.evictions);
  e.counter("hypic_cache_disk_full_deletions_total",
            "Entry files deleted from the disk tier because the disk of --cache-dir was full.", live.cache.disk_shed);
  if (const auto& r = live.remote) {
    e.gauge("hypic_segment_store_up", "Whether the shared tier (--segment-store) answers (0: in a backoff period).",
            r->up ? 1 : 0);
    e.counter("hypic_segment_store_hits_total", "Entries fetched from the shared tier and verified.", r->hits);
    e.counter("hypic_segment_store_misses_total", "Lookups the shared tier did not hold.", r->misses);
    e.counter("hypic_segment_store_errors_total", "Lookups the shared tier did not answer (down, timeout).",
              r->errors);
    e.counter("hypic_segment_store_corrupt_total", "Shared-tier values that failed their checks (deleted, rebuilt).",
              r->corrupt);
    e.counter("hypic_segment_store_puts_total", "Entries written to the shared tier.", r->puts);
    e.counter("hypic_segment_store_put_dropped_total", "Writes to the shared tier dropped (queue full) or failed.",
              r->put_dropped);
    e.counter("hypic_segment_store_read_bytes_total", "Entry bytes read from the shared tier.", r->bytes_read);
    e.counter("hypic_segment_store_written_bytes_total", "Entry bytes written to the shared tier.", r->bytes_written);
  }
  e.gauge("hypic_queue_depth", "Requests waiting for a worker.", live.queue_depth);
  e.gauge("hypic_running_requests", "Requests running on a worker.", live.running);
  e.gauge("hypic_registered_segments", "Segments registered with POST /v1/segments.",
          double(live.registered_segments));
  e.gauge("hypic_registered_segment_bytes", "Cache bytes pinned by registered segments.",
          double(live.registered_bytes));
  if (live.registry_forgot) {
    e.counter("hypic_segment_registry_forgot_total",
              "Times the shared registry (--segment-store) was found to have lost every record.", *live.registry_forgot);
    e.counter("hypic_segment_registry_republished_total",
              "Registrations this instance wrote to the shared registry again after it lost them.",
              live.registry_republished.value_or(0));
  }
  return e.text();
}

}  // namespace hypic::server
