// Scatter against in-process workers (a WorkerServer on an ephemeral loopback port): every
// policy, local lanes, and each fault — corrupt entries, a deadline, an unreachable worker,
// cancellation, a model mismatch — ends with entries that compose to exactly the logits of a
// single instance's cold run.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "core/log.h"
#include "core/timer.h"
#include "cluster/scatter.h"
#include "cluster/worker.h"
#include "cluster_util.h"
#include "hypic_cluster.grpc.pb.h"

namespace hypic::cluster {
namespace {

using test::dist_model;
using test::dist_opts;
using test::dist_parts;
using test::dist_store;

std::unique_ptr<WorkerServer> start_worker(WorkerOptions o = {}) {
  auto w = WorkerServer::start(dist_model(), o);
  EXPECT_TRUE(w.is_ok()) << w.status().to_string();
  return std::move(w).value();
}

class ScatterTest : public ::testing::Test {
 protected:
  void SetUp() override { set_log_level(LogLevel::kError); }  // failures are expected here
  void TearDown() override { set_log_level(LogLevel::kInfo); }

  // Scatters `p` into a fresh store, composes, and checks the logits against a cold single
  // instance; then again with composition overlapping the call (start, compose from the
  // arriving entries, wait), which must give the same logits and the same counts. Returns
  // the stats of the first run.
  ScatterStats check(const ScatterOptions& so, const PromptParts& p,
                     const ComposeOptions& o = dist_opts()) {
    const auto want = test::reference_logits(p, o);
    auto store = dist_store();
    Scatter s(dist_model(), store, so);
    ScatterStats st;
    auto pins = s.prefill_segments(test::keyed(p, o), o, nullptr, &st);
    EXPECT_TRUE(pins.is_ok()) << pins.status().to_string();
    ComposeStats cs;
    const auto got = test::compose_logits(store, p, o, &cs);
    EXPECT_EQ(cs.segments_missed, 0) << "every segment was ready before the prefill";
    EXPECT_GE(cs.segments_hit, st.segments);  // a duplicate segment hits twice
    EXPECT_EQ(got, want);

    auto store2 = dist_store();
    Scatter s2(dist_model(), store2, so);
    ScatterStats st2;
    const TokenizedRequest req = test::keyed(p, o);
    std::unique_ptr<ScatterCall> call = s2.start(req, o, nullptr, &st2);
    ComposeOptions ao = o;
    ao.arriving = &call->arriving();
    EXPECT_EQ(call->arriving().size(), size_t(st.segments));
    ComposeStats cs2;
    const auto overlapped = test::compose_logits(store2, p, ao, &cs2);
    auto pins2 = call->wait();
    EXPECT_TRUE(pins2.is_ok()) << pins2.status().to_string();
    EXPECT_EQ(overlapped, want) << "composition overlapping the call";
    EXPECT_EQ(st2.built_remote + st2.built_local, st.built_remote + st.built_local);
    EXPECT_EQ(st2.corrupt, st.corrupt);
    return st;
  }
};

TEST_F(ScatterTest, EveryPolicyMatchesASingleInstanceColdAndWarm) {
  auto w = start_worker();
  const PromptParts p = dist_parts({90, 40, 130, 60, 25});
  for (Policy pol : {Policy::kLpt, Policy::kRoundRobin, Policy::kContiguous}) {
    ScatterOptions so;
    so.workers = {w->address()};
    so.local_lanes = 1;
    so.policy = pol;
    const ScatterStats st = check(so, p);
    EXPECT_EQ(st.segments, 5) << policy_name(pol);
    EXPECT_EQ(st.built_remote + st.built_local, 5);
    EXPECT_GT(st.built_remote, 0) << policy_name(pol);
    EXPECT_EQ(st.worker_failures + st.corrupt + st.rescheduled, 0) << st.errors.size();
  }
  // Warm: a second call over the same store finds everything.
  auto store = dist_store();
  ScatterOptions so;
  so.workers = {w->address()};
  Scatter s(dist_model(), store, so);
  ScatterStats cold, warm;
  ASSERT_TRUE(s.prefill_segments(test::keyed(p, dist_opts()), dist_opts(), nullptr, &cold).is_ok());
  ASSERT_TRUE(s.prefill_segments(test::keyed(p, dist_opts()), dist_opts(), nullptr, &warm).is_ok());
  EXPECT_EQ(warm.hits, 5);
  EXPECT_EQ(warm.built_remote + warm.built_local, 0);
  EXPECT_EQ(test::compose_logits(store, p, dist_opts()), test::reference_logits(p, dist_opts()));
}

TEST_F(ScatterTest, LocalLanesOnlyAndSaltAndDuplicates) {
  PromptParts p = dist_parts({70, 50, 3, 80});  // 3 tokens: too short, recomputed in context
  p.segments.push_back(p.segments[0]);          // a duplicate is built once
  ScatterOptions so;
  so.local_lanes = 2;
  const ScatterStats st = check(so, p, dist_opts(8, "tenant-a"));
  EXPECT_EQ(st.segments, 3);
  EXPECT_EQ(st.built_local, 3);
  so.local_lane_threads = 1;  // one OpenMP thread per lane: the same bits
  EXPECT_EQ(check(so, p).built_local, 3);
  so.local_lane_threads = 0;
  so.local_lanes = 0;  // no lanes at all: the calling thread still builds
  EXPECT_EQ(check(so, p).built_local, 3);
}

TEST_F(ScatterTest, CorruptEntriesAreRejectedAndRebuiltLocally) {
  WorkerOptions wo;
  wo.debug_corrupt_every = 1;
  auto w = start_worker(wo);
  ScatterOptions so;
  so.workers = {w->address()};
  so.local_lanes = 0;  // everything planned on the worker
  const ScatterStats st = check(so, dist_parts({60, 45, 75}));
  EXPECT_EQ(st.corrupt, 3);
  EXPECT_EQ(st.built_remote, 0);
  EXPECT_EQ(st.built_local, 3);
  ASSERT_FALSE(st.errors.empty());
  EXPECT_NE(st.errors[0].find("checksum"), std::string::npos) << st.errors[0];
}

TEST_F(ScatterTest, MissedDeadlineIsRescheduled) {
  WorkerOptions wo;
  wo.debug_delay_ms = 5000;
  auto w = start_worker(wo);
  ScatterOptions so;
  so.workers = {w->address()};
  so.local_lanes = 0;
  so.deadline_floor_s = 0.3;
  so.deadline_slack = 0;
  Timer t;
  const ScatterStats st = check(so, dist_parts({50, 60}));
  EXPECT_LT(t.seconds(), 4.0);
  EXPECT_EQ(st.worker_failures, 1);
  EXPECT_EQ(st.rescheduled, 2);
  EXPECT_EQ(st.built_local, 2);
}

TEST_F(ScatterTest, UnreachableWorkerIsSkippedOrRescheduled) {
  int dead_port = 0;
  {
    auto w = start_worker();
    dead_port = w->port();
  }  // shut down: the port refuses connections now
  const std::string dead = host_port("127.0.0.1", dead_port);
  auto live = start_worker();
  for (bool probe : {true, false}) {
    ScatterOptions so;
    so.workers = {dead, live->address()};
    so.local_lanes = 0;
    so.query_load = probe;
    so.policy = Policy::kRoundRobin;
    const ScatterStats st = check(so, dist_parts({50, 60, 70, 40}));
    EXPECT_EQ(st.worker_failures, 1) << probe;
    EXPECT_EQ(st.built_remote + st.built_local, 4);
    // Probed: never planned on the dead worker (lane 0); else its two go to the local lane.
    EXPECT_EQ(st.rescheduled, probe ? 0 : 2);
    EXPECT_EQ(std::count(st.lane_of.begin(), st.lane_of.end(), 0), probe ? 0 : 2);
  }
}

TEST_F(ScatterTest, CancellationEndsTheCallPromptly) {
  WorkerOptions wo;
  wo.debug_delay_ms = 3000;
  auto w = start_worker(wo);
  ScatterOptions so;
  so.workers = {w->address()};
  so.local_lanes = 0;
  Scatter s(dist_model(), dist_store(), so);
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel = true;
  });
  Timer t;
  ScatterStats st;
  auto r = s.prefill_segments(test::keyed(dist_parts({50, 60}), dist_opts()), dist_opts(), &cancel, &st);
  canceller.join();
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  EXPECT_LT(t.seconds(), 2.0);
}

TEST_F(ScatterTest, WorkerRefusesAnotherModelClearly) {
  auto w = start_worker();
  auto stub = pb::SegmentWorker::NewStub(
      grpc::CreateChannel(w->address(), grpc::InsecureChannelCredentials()));
  pb::PrefillRequest req;
  req.set_model_fingerprint("some-other-model");
  req.set_dtype("F32");
  req.add_segments()->mutable_tokens()->Add(1);
  grpc::ClientContext ctx;
  auto reader = stub->Prefill(&ctx, req);
  pb::EntryChunk ch;
  EXPECT_FALSE(reader->Read(&ch));
  const grpc::Status st = reader->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("--model"), std::string::npos) << st.error_message();

  grpc::ClientContext sctx;
  pb::WorkerStatus ws;
  ASSERT_TRUE(stub->GetStatus(&sctx, pb::StatusRequest(), &ws).ok());
  EXPECT_EQ(ws.model_fingerprint(), dist_model().fingerprint());
  EXPECT_EQ(ws.dtype(), "F32");
  EXPECT_EQ(ws.queued_tokens(), 0u);
}

TEST_F(ScatterTest, CostModelLearnsFromBuilds) {
  ScatterOptions so;
  so.local_lanes = 1;
  Scatter s(dist_model(), dist_store(), so);
  const CostModel prior = s.cost_model();
  EXPECT_GT(prior.b, 0);
  ScatterStats st;
  ASSERT_TRUE(s.prefill_segments(test::keyed(dist_parts({40, 80, 160}), dist_opts()), dist_opts(), nullptr, &st).is_ok());
  const CostModel fit = s.cost_model();
  EXPECT_TRUE(fit.a != prior.a || fit.b != prior.b || fit.c != prior.c);
  EXPECT_GT(fit.seconds(160), 0);
}

}  // namespace
}  // namespace hypic::cluster
