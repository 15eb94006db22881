// core/log.h: ISO 8601 UTC timestamps, the text and JSON forms, JSON event lines.
#include <gtest/gtest.h>

#include <regex>

#include <nlohmann/json.hpp>

#include "core/log.h"

namespace hypic {
namespace {

const std::regex kIso(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");

// The form set for one test, restored after it.
class LogForm : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = log_format(); }
  void TearDown() override { set_log_format(saved_); }
  static std::string captured(void (*write)()) {
    ::testing::internal::CaptureStderr();
    write();
    return ::testing::internal::GetCapturedStderr();
  }
  LogFormat saved_ = LogFormat::kText;
};

TEST_F(LogForm, TimestampIsIso8601Utc) {
  EXPECT_TRUE(std::regex_match(log_timestamp(), kIso)) << log_timestamp();
  LogFormat f = LogFormat::kText;
  EXPECT_TRUE(parse_log_format("json", &f));
  EXPECT_EQ(f, LogFormat::kJson);
  EXPECT_FALSE(parse_log_format("xml", &f));
  EXPECT_EQ(f, LogFormat::kJson);
}

TEST_F(LogForm, TextLines) {
  set_log_format(LogFormat::kText);
  const std::string out = captured([] {
    HYPIC_LOG_WARN("disk %d%% full", 93);
    log_status("hypic serve: stopped");
  });
  std::smatch m;
  ASSERT_TRUE(std::regex_match(out, m, std::regex(R"((\S+) W disk 93% full\nhypic serve: stopped\n)"))) << out;
  EXPECT_TRUE(std::regex_match(m[1].str(), kIso));
}

TEST_F(LogForm, JsonLines) {
  set_log_format(LogFormat::kJson);
  const std::string out = captured([] {
    HYPIC_LOG_ERROR("bad \"%s\" \xff", "name");  // quotes escaped, invalid UTF-8 replaced
    log_status("hypic serve: stopped");
    log_json_line(R"({"event":"drain","ms":1.5})");
    log_json_line("{}");
  });
  std::vector<nlohmann::json> lines;
  size_t at = 0;
  for (size_t nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1)
    lines.push_back(nlohmann::json::parse(out.substr(at, nl - at)));
  ASSERT_EQ(lines.size(), 4u) << out;
  EXPECT_EQ(out.rfind("{\"ts\":", 0), 0u) << out;  // ts first
  EXPECT_EQ(lines[0]["level"], "error");
  EXPECT_EQ(lines[0]["msg"], "bad \"name\" \xef\xbf\xbd");
  EXPECT_EQ(lines[1]["level"], "info");
  EXPECT_EQ(lines[1]["msg"], "hypic serve: stopped");
  EXPECT_EQ(lines[2]["event"], "drain");
  EXPECT_EQ(lines[2]["ms"], 1.5);
  for (const auto& l : lines) EXPECT_TRUE(std::regex_match(l["ts"].get<std::string>(), kIso)) << l.dump();
}

}  // namespace
}  // namespace hypic
