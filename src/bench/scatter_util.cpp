#include "bench/scatter_util.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

#include "cache/segment_store.h"
#include "checkpoint/safetensors.h"
#include "cluster/wire.h"
#include "core/log.h"
#include "core/timer.h"
#include "hypic_cluster.grpc.pb.h"

extern char** environ;

namespace hypic::bench {

Result<std::vector<int64_t>> skewed_lengths(int64_t total, int n, const std::string& skew,
                                            int64_t min_len, uint32_t seed) {
  if (n < 1 || min_len < 1 || total < int64_t(n) * min_len)
    return invalid_argument("cannot split " + std::to_string(total) + " tokens into " +
                            std::to_string(n) + " segments of at least " + std::to_string(min_len));
  std::vector<double> w(size_t(n), 1.0);
  const bool zipf = skew.rfind("zipf:", 0) == 0;
  const std::string num = zipf ? skew.substr(5) : skew;
  char* end = nullptr;
  const double v = std::strtod(num.c_str(), &end);
  if (num.empty() || *end || !std::isfinite(v) || v < 0)
    return invalid_argument("--skew must be a factor F >= 0 or zipf:S (S >= 0), got '" + skew + "'");
  for (int i = 0; i < n; ++i)
    w[size_t(i)] = zipf ? 1.0 / std::pow(i + 1.0, v)
                        : (v <= 1 || n == 1 ? 1.0 : std::pow(v, double(i) / double(n - 1)));
  const double W = std::accumulate(w.begin(), w.end(), 0.0);
  const int64_t rest = total - int64_t(n) * min_len;
  std::vector<int64_t> L(static_cast<size_t>(n));
  int64_t sum = 0;
  for (size_t i = 0; i < L.size(); ++i) sum += L[i] = min_len + int64_t(std::floor(double(rest) * w[i] / W));
  for (size_t i = 0; sum < total; i = (i + 1) % L.size(), ++sum) L[i] += 1;
  std::shuffle(L.begin(), L.end(), std::mt19937(seed));
  return L;
}

WorkerProcesses::~WorkerProcesses() {
  for (pid_t p : pids_) ::kill(p, SIGTERM);
  for (pid_t p : pids_) {
    int st = 0;
    for (int i = 0; i < 500 && ::waitpid(p, &st, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (::waitpid(p, &st, WNOHANG) == 0) {
      ::kill(p, SIGKILL);
      ::waitpid(p, &st, 0);
    }
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

Status WorkerProcesses::start(const std::string& bin, const std::vector<std::string>& worker_args,
                              int n, int threads, double timeout_s) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "hypic_bench_scatter_XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) return io_error("cannot create a temporary directory");
  dir_ = tmpl;
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("OMP_NUM_THREADS=", 0) != 0) env.push_back(*e);
  env.push_back("OMP_NUM_THREADS=" + std::to_string(threads));
  std::vector<char*> envp;
  for (std::string& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> logs;
  for (int i = 0; i < n; ++i) {
    logs.push_back(dir_ + "/worker" + std::to_string(i) + ".stderr");
    std::vector<std::string> args = {bin, "worker", "--port", "0"};
    args.insert(args.end(), worker_args.begin(), worker_args.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, logs.back().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return io_error("cannot start " + bin + ": " + std::strerror(rc));
    pids_.push_back(pid);
  }
  addresses_.assign(size_t(n), "");
  const Timer t;
  for (int i = 0; i < n; ++i) {
    for (;;) {
      std::ifstream f(logs[size_t(i)]);
      std::stringstream ss;
      ss << f.rdbuf();
      const std::string s = ss.str();
      const size_t at = s.find(" on 127.0.0.1:");
      if (at != std::string::npos && s.find('\n', at) != std::string::npos) {
        addresses_[size_t(i)] = s.substr(at + 4, s.find('\n', at) - at - 4);
        break;
      }
      int st = 0;
      if (::waitpid(pids_[size_t(i)], &st, WNOHANG) == pids_[size_t(i)]) {
        pids_.erase(pids_.begin() + i);
        return internal_error("worker " + std::to_string(i) + " exited: " + s);
      }
      if (t.seconds() > timeout_s) return internal_error("worker " + std::to_string(i) + " did not start: " + s);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return Status::ok();
}

namespace {
double ticks_to_s(unsigned long long t) { return double(t) / double(::sysconf(_SC_CLK_TCK)); }
// utime + stime of a process (fields 14 and 15 of /proc/PID/stat), 0 if gone.
double process_cpu(const std::string& pid) {
  std::ifstream f("/proc/" + pid + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(s.substr(close + 2));
  std::string field;
  unsigned long long ut = 0, st = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) ut = std::stoull(field);
    if (i == 15) st = std::stoull(field);
  }
  return ticks_to_s(ut + st);
}
}  // namespace

CpuMeter::CpuMeter(std::vector<pid_t> pids) : pids_(std::move(pids)) {
  busy0_ = machine_busy();
  ours0_ = ours_now();
}
double CpuMeter::machine_busy() {  // "cpu user nice system idle iowait irq softirq steal"
  std::ifstream f("/proc/stat");
  std::string cpu;
  unsigned long long v[8] = {};
  f >> cpu;
  for (auto& x : v) f >> x;
  return ticks_to_s(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
}
double CpuMeter::ours_now() const {
  double t = process_cpu("self");
  for (pid_t p : pids_) t += process_cpu(std::to_string(p));
  return t;
}
double CpuMeter::busy_s() const { return machine_busy() - busy0_; }
double CpuMeter::ours_s() const { return ours_now() - ours0_; }

Result<Calibration> calibrate(const Model& model, const std::string& address,
                              const TokenizedRequest& req, size_t max_message_bytes) {
  const size_t n = req.segments.size();
  for (size_t i = 0; i < n; ++i)
    if (req.segments[i].key.empty())
      return invalid_argument("calibration: segment " + std::to_string(i) + " of " +
                              std::to_string(req.segments[i].tokens.size()) +
                              " tokens has no body under seam " + std::to_string(req.seam));
  Calibration c;
  const Timer wall;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(int(max_message_bytes));
  args.SetMaxSendMessageSize(int(max_message_bytes));
  auto stub = cluster::pb::SegmentWorker::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  std::vector<double> rtt;
  for (int i = 0; i < 21; ++i) {  // the first connects: not counted
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    cluster::pb::WorkerStatus resp;
    const Timer t;
    const grpc::Status st = stub->GetStatus(&ctx, cluster::pb::StatusRequest(), &resp);
    if (!st.ok()) return io_error(address + ": GetStatus: " + st.error_message());
    if (i > 0) rtt.push_back(t.seconds());
  }
  std::sort(rtt.begin(), rtt.end());
  c.rpc_latency_s = rtt[rtt.size() / 2];

  cluster::pb::PrefillRequest pr;
  pr.set_model_fingerprint(model.fingerprint());
  pr.set_dtype(safetensors_dtype_name(model.compute_type()));
  pr.set_seam(req.seam);
  pr.set_salt(req.salt);
  for (size_t i = 0; i < n; ++i) {
    cluster::pb::Segment* s = pr.add_segments();
    s->set_index(uint32_t(i));
    s->mutable_tokens()->Add(req.segments[i].tokens.begin(), req.segments[i].tokens.end());
  }
  // Each entry arrives as one part per decoder layer; a part is consecutive chunks.
  const int layers = model.config().num_hidden_layers;
  std::vector<std::vector<std::string>> parts_of(n, std::vector<std::string>(size_t(layers)));
  std::vector<double> entry_bytes(n, 0), last(n, -1), build(n, 0);
  double moved = 0, moving = 0;  // bytes after a part's first chunk, and the time they took
  {
    grpc::ClientContext ctx;
    const Timer t;
    auto reader = stub->Prefill(&ctx, pr);
    cluster::pb::EntryChunk ch;
    double first = 0, first_payload = 0;
    while (reader->Read(&ch)) {
      const double now = t.seconds();
      const size_t i = ch.index(), l = ch.layer();
      if (i >= n || l >= size_t(layers) || ch.offset() != parts_of[i][l].size())
        return internal_error("calibration: chunk out of order");
      if (ch.offset() == 0) first = now, first_payload = double(ch.data().size());
      parts_of[i][l] += ch.data();
      if (parts_of[i][l].size() != ch.total_bytes()) continue;
      entry_bytes[i] += double(ch.total_bytes());
      if (now > first) moved += double(ch.total_bytes()) - first_payload, moving += now - first;
      if (l + 1 == size_t(layers)) {
        last[i] = now;
        build[i] = ch.build_seconds();
        HYPIC_LOG_INFO("bench scatter: calibration: segment %zu (%zu tokens) built in %.2f s, %.1f MB",
                       i, req.segments[i].tokens.size(), build[i], entry_bytes[i] / 1e6);
      }
    }
    const grpc::Status st = reader->Finish();
    if (!st.ok()) return io_error(address + ": Prefill: " + st.error_message());
  }
  for (size_t i = 0; i < n; ++i) {
    if (last[i] < 0) return internal_error("calibration: segment " + std::to_string(i) + " never arrived");
    c.builds.push_back({int64_t(req.segments[i].tokens.size()), build[i]});
    c.entry_bytes.push_back(entry_bytes[i]);
  }
  c.bandwidth_Bps = moving > 0 ? moved / moving : 0;  // 0: every part fit in one message

  // Ingest as Scatter does it (verify and place each layer, insert), then serialise again.
  SegmentStore::Options so;
  so.mem_budget_bytes = size_t(16) << 30;
  auto store = SegmentStore::open(so);
  if (!store) return store.status();
  double total = 0, t_in = 0, t_out = 0;
  for (size_t i = 0; i < n; ++i) {
    const Timer ti;
    const SegmentRef& seg = req.segments[i];
    SegmentEntry e = model.empty_entry(seg.tokens, req.seam, seg.key);
    for (int l = 0; l < layers; ++l) {
      Result<SegmentEntry> part = deserialize_entry(parts_of[i][size_t(l)]);
      if (!part) return part.status();
      HYPIC_RETURN_IF_ERROR(model.set_entry_layer(&e, l, std::move(*part)));
      std::string().swap(parts_of[i][size_t(l)]);
    }
    SegmentStore::Pin pin = (*store)->insert(seg.key, std::move(e), build[i]);
    t_in += ti.seconds();
    const Timer to;
    for (int l = 0; l < layers; ++l) {
      SegmentEntry part = model.entry_layer(*pin, l);
      part.key = seg.key;
      Result<std::string> again = serialize_entry(part);
      if (!again) return again.status();
    }
    t_out += to.seconds();
    total += entry_bytes[i];
  }
  c.ingest_s_per_byte = t_in / total;
  c.serialize_s_per_byte = t_out / total;

  // Entry size: least squares e0 + e1·L (exact up to metadata).
  double sl = 0, sb = 0, sll = 0, slb = 0;
  for (size_t i = 0; i < n; ++i) {
    const double L = double(c.builds[i].tokens), B = c.entry_bytes[i];
    sl += L, sb += B, sll += L * L, slb += L * B;
  }
  const double dn = double(n), den = dn * sll - sl * sl;
  if (den > 1e-9 * dn * sll) {
    c.entry_bytes_per_token = (dn * slb - sl * sb) / den;
    c.entry_bytes_base = (sb - c.entry_bytes_per_token * sl) / dn;
  } else {
    c.entry_bytes_base = sb / dn;  // one length only
  }
  c.wall_s = wall.seconds();
  return c;
}

}  // namespace hypic::bench
