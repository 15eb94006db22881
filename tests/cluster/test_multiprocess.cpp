// Segment parallelism across processes on loopback: this test process is the combine
// worker, `hypic worker` processes (HYPIC_BIN) are the scatter workers. Cold and warm runs,
// a worker killed mid-stream and a worker sending corrupt entries all give exactly the
// logits of a single instance.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/log.h"
#include "cluster/scatter.h"
#include "cluster_util.h"

#ifndef HYPIC_BIN
#error "HYPIC_BIN (path of the hypic binary) must be defined by the build"
#endif

extern char** environ;

namespace hypic::cluster {
namespace {

namespace fs = std::filesystem;
using test::dist_opts;
using test::dist_parts;
using test::dist_store;

// A `hypic worker` child process on an ephemeral loopback port.
class WorkerProcess {
 public:
  WorkerProcess(const fs::path& dir, const std::string& name, std::vector<std::string> extra) {
    log_ = dir / (name + ".stderr");
    std::vector<std::string> args = {HYPIC_BIN, "worker", "--model", test::dist_model_dir(),
                                      "--dtype", "f32", "--port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    const int rc = posix_spawn(&pid_, HYPIC_BIN, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) pid_ = -1;
  }
  ~WorkerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // Waits for "hypic worker: ... on 127.0.0.1:PORT"; empty on timeout or early exit.
  std::string address(double timeout_s = 60) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (pid_ > 0 && std::chrono::steady_clock::now() < end) {
      std::ifstream f(log_);
      std::stringstream ss;
      ss << f.rdbuf();
      const std::string s = ss.str();
      const size_t at = s.find(" on 127.0.0.1:");
      if (at != std::string::npos && s.find('\n', at) != std::string::npos)
        return s.substr(at + 4, s.find('\n', at) - at - 4);
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        ADD_FAILURE() << "worker exited early: " << s;
        return "";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "worker did not report its port";
    return "";
  }
  void kill_now() { ::kill(pid_, SIGKILL); }
  // SIGTERM; the exit code (0: a graceful stop).
  int terminate() {
    ::kill(pid_, SIGTERM);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

 private:
  fs::path log_;
  pid_t pid_ = -1;
};

class MultiProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    set_log_level(LogLevel::kError);
    std::string tmpl = (fs::path(::testing::TempDir()) / "hypic_cluster_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    set_log_level(LogLevel::kInfo);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(MultiProcess, TwoWorkersColdAndWarmMatchASingleInstance) {
  WorkerProcess a(dir_, "a", {}), b(dir_, "b", {});
  const std::string aa = a.address(), ba = b.address();
  ASSERT_FALSE(aa.empty() || ba.empty());
  const PromptParts p = dist_parts({120, 40, 90, 70, 30, 100}, 11);
  const ComposeOptions o = dist_opts(4, "salt");
  auto store = dist_store();
  ScatterOptions so;
  so.workers = {aa, ba};
  so.local_lanes = 0;  // only the workers build
  Scatter s(test::dist_model(), store, so);
  ScatterStats cold, warm;
  ASSERT_TRUE(s.prefill_segments(test::keyed(p, o), o, nullptr, &cold).is_ok());
  EXPECT_EQ(cold.built_remote, 6);
  EXPECT_EQ(cold.worker_failures, 0);
  EXPECT_NE(std::count(cold.lane_of.begin(), cold.lane_of.end(), 0), 0) << "both workers used";
  EXPECT_NE(std::count(cold.lane_of.begin(), cold.lane_of.end(), 1), 0);
  const auto ref = test::reference_logits(p, o);
  EXPECT_EQ(test::compose_logits(store, p, o), ref);
  ASSERT_TRUE(s.prefill_segments(test::keyed(p, o), o, nullptr, &warm).is_ok());
  EXPECT_EQ(warm.hits, 6);
  EXPECT_EQ(test::compose_logits(store, p, o), ref);
  EXPECT_EQ(a.terminate(), 0);  // SIGTERM: graceful stop
  EXPECT_EQ(b.terminate(), 0);
}

TEST_F(MultiProcess, KilledWorkerMidStreamStillCompletesCorrectly) {
  WorkerProcess slow(dir_, "slow", {"--debug-delay-ms", "300"}), b(dir_, "b", {});
  const std::string sa = slow.address(), ba = b.address();
  ASSERT_FALSE(sa.empty() || ba.empty());
  const PromptParts p = dist_parts({60, 50, 80, 40, 70, 55}, 21);
  ScatterOptions so;
  so.workers = {sa, ba};
  so.local_lanes = 0;
  so.policy = Policy::kRoundRobin;  // three segments each
  std::atomic<bool> killed{false};
  so.on_ingest = [&](int lane, int, bool remote) {
    if (remote && lane == 0 && !killed.exchange(true)) slow.kill_now();  // after its 1st entry
  };
  auto store = dist_store();
  Scatter s(test::dist_model(), store, so);
  ScatterStats st;
  ASSERT_TRUE(s.prefill_segments(test::keyed(p, dist_opts()), dist_opts(), nullptr, &st).is_ok());
  EXPECT_TRUE(killed.load());
  EXPECT_EQ(st.worker_failures, 1);
  EXPECT_EQ(st.rescheduled, 2);
  EXPECT_EQ(st.built_remote, 4);
  EXPECT_EQ(st.built_local, 2);
  EXPECT_EQ(test::compose_logits(store, p, dist_opts()), test::reference_logits(p, dist_opts()));
}

TEST_F(MultiProcess, CorruptEntriesFromAWorkerAreRecomputed) {
  WorkerProcess bad(dir_, "bad", {"--debug-corrupt-every", "1"}), good(dir_, "good", {});
  const std::string ba = bad.address(), ga = good.address();
  ASSERT_FALSE(ba.empty() || ga.empty());
  const PromptParts p = dist_parts({60, 50, 80, 40}, 31);
  ScatterOptions so;
  so.workers = {ba, ga};
  so.local_lanes = 0;
  so.policy = Policy::kRoundRobin;
  auto store = dist_store();
  Scatter s(test::dist_model(), store, so);
  ScatterStats st;
  ASSERT_TRUE(s.prefill_segments(test::keyed(p, dist_opts()), dist_opts(), nullptr, &st).is_ok());
  EXPECT_EQ(st.corrupt, 2);
  EXPECT_EQ(st.built_remote, 2);
  EXPECT_EQ(st.built_local, 2);
  EXPECT_EQ(test::compose_logits(store, p, dist_opts()), test::reference_logits(p, dist_opts()));
}

}  // namespace
}  // namespace hypic::cluster
