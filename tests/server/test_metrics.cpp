// Prometheus exposition: every line matches the text format's grammar; histograms are
// cumulative and end with +Inf = count.
#include <gtest/gtest.h>

#include <cmath>

#include "server/exposition_check.h"
#include "server/metrics.h"

namespace hypic::server {
namespace {

TEST(Metrics, HistogramBucketsAreCumulative) {
  Histogram h({0.1, 1, 10});
  for (double v : {0.05, 0.1, 0.5, 5.0, 50.0, 1.0}) h.observe(v);
  const auto s = h.snapshot();
  ASSERT_EQ(s.cumulative.size(), 4u);
  EXPECT_EQ(s.cumulative[0], 2u);  // 0.05, 0.1 (le is inclusive)
  EXPECT_EQ(s.cumulative[1], 4u);  // + 0.5, 1.0
  EXPECT_EQ(s.cumulative[2], 5u);  // + 5
  EXPECT_EQ(s.cumulative[3], 6u);  // + 50 (+Inf)
  EXPECT_EQ(s.count, 6u);
  EXPECT_NEAR(s.sum, 56.65, 1e-9);
}

TEST(Metrics, NumbersAndLabelsAreEscaped) {
  EXPECT_EQ(Exposition::number(0.25), "0.25");
  EXPECT_EQ(Exposition::number(3), "3");
  EXPECT_EQ(Exposition::number(1e-7), "1e-07");
  EXPECT_EQ(Exposition::number(INFINITY), "+Inf");
  EXPECT_EQ(Exposition::number(-INFINITY), "-Inf");
  EXPECT_EQ(Exposition::number(NAN), "NaN");
  LabeledCounter c;
  c.inc("200");
  c.inc("200", 2);
  c.inc("a\"b\\c\nd");
  EXPECT_EQ(c.value("200"), 3u);
  EXPECT_EQ(c.value("404"), 0u);
  Exposition e;
  e.labeled_counter("x_total", "help text", "status", c.values());
  EXPECT_NE(e.text().find(R"(x_total{status="a\"b\\c\nd"} 1)"), std::string::npos) << e.text();
  EXPECT_EQ(check_exposition(e.text()), "");
}

TEST(Metrics, ServerMetricsRenderParses) {
  ServerMetrics m;
  m.count_request(200);
  m.count_request(429);
  ComposeStats cs;
  cs.prompt_tokens = 30;
  cs.reused_tokens = 20;
  cs.recomputed_tokens = 10;
  cs.seam_tokens = 8;
  cs.segments_hit = 1;
  cs.segments_missed = 2;
  m.record_compose(cs);
  m.record_generation(5, 12.5);
  m.record_generation(0, -1);  // no token: no TTFT sample
  InterTokenTimer t(&m.inter_token);
  for (int i = 0; i < 4; ++i) t.tick();
  ServerMetrics::Live live;
  live.queue_depth = 2;
  live.running = 1;
  live.registered_segments = 3;
  live.cache.mem_bytes = 1234;
  live.cache.evictions = 7;
  const std::string text = m.render(live);
  EXPECT_EQ(check_exposition(text), "") << text;
  for (const char* want : {"hypic_requests_total{status=\"200\"} 1", "hypic_requests_total{status=\"429\"} 1",
                           "hypic_ttft_seconds_count 1", "hypic_ttft_seconds_bucket{le=\"0.025\"} 1",
                           "hypic_ttft_seconds_bucket{le=\"0.01\"} 0",
                           "hypic_inter_token_latency_seconds_count 3", "hypic_prompt_tokens_total 30",
                           "hypic_generation_tokens_total 5", "hypic_tokens_reused_total 20",
                           "hypic_tokens_recomputed_total 10", "hypic_seam_tokens_total 8",
                           "hypic_segment_hits_total 1", "hypic_segment_misses_total 2",
                           "hypic_cache_bytes 1234", "hypic_cache_entries 0", "hypic_cache_evictions_total 7",
                           "hypic_queue_depth 2", "hypic_running_requests 1", "hypic_registered_segments 3",
                           "# TYPE hypic_ttft_seconds histogram", "# TYPE hypic_requests_total counter",
                           "# TYPE hypic_queue_depth gauge"})
    EXPECT_NE(text.find(std::string(want) + "\n"), std::string::npos) << want;
}

TEST(Metrics, CheckerRejectsBadLines) {
  EXPECT_NE(check_exposition("x 1"), "");                     // no final newline
  EXPECT_NE(check_exposition("# TYPE x counter\nx one\n"), "");
  EXPECT_NE(check_exposition("# TYPE x counter\nx{a=\"b} 1\n"), "");
  EXPECT_NE(check_exposition("# TYPE x counter\ny 1\n"), "");
  EXPECT_EQ(check_exposition("# HELP x h\n# TYPE x counter\nx{a=\"b\"} 1e+03\n"), "");
}

}  // namespace
}  // namespace hypic::server
