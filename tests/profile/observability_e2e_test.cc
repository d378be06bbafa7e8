// Observability end to end: a training run's trace.json (one process per
// rank, valid nesting), report.html, the straggler warning naming an
// injected slow rank, and the leak warning firing on an injected leak and
// staying quiet on a clean run.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <map>
#include <set>

#include "profile/trace_file.h"
#include "support/cli_runner.h"
#include "support/train_config.h"

namespace crucible::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string config(const TempDir& dir, int steps) {
  testutil::SmallRun run;
  run.steps = steps;
  run.batch = 2;
  run.eval_every = 0;
  run.ckpt_every = 0;
  run.sample_tokens = 0;
  run.name = "obs";
  return testutil::write_small_config(dir, run);
}

TEST(Observability, TwoRankRunWritesTraceReportAndNamesTheStraggler) {
  TempDir dir("obs_two_ranks");
  ::setenv("ASAN_OPTIONS", "detect_leaks=0", 1);  // see dist_train_test.cc
  const std::string run = dir / "run";
  auto r = run_crucible({"launch", "-n", "2", "--threads", "1", "--", "train", config(dir, 12),
                         "--run-dir", run, "--set", "run.trace_from=3", "--set",
                         "run.trace_steps=2", "--set",
                         "fault.inject=[\"slow@1:rank=1:ms=40:attempt=all\"]"});
  ASSERT_EQ(r.code, 0) << r.output;
  // The trace: valid, one process per rank, the phases and the kernels.
  Status v = profile::validate_trace_file(run + "/trace.json");
  ASSERT_TRUE(v.is_ok()) << v.message();
  json t = json::parse(read_file(run + "/trace.json"));
  std::set<int> pids, named;
  std::set<std::string> phases, kernels;
  for (const auto& e : t["traceEvents"]) {
    pids.insert(e["pid"].get<int>());
    if (e["ph"] == "M" && e["name"] == "process_name") named.insert(e["pid"].get<int>());
    if (e.value("cat", "") == "phase") phases.insert(e["name"].get<std::string>());
    if (e.value("cat", "") == "kernel") kernels.insert(e["name"].get<std::string>());
  }
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  EXPECT_EQ(named, (std::set<int>{0, 1}));
  for (const char* p : {"data wait", "forward", "backward", "gradient allreduce", "optimizer"})
    EXPECT_TRUE(phases.count(p)) << p;
  EXPECT_TRUE(kernels.count("gemm"));
  EXPECT_FALSE(fs::exists(run + "/trace.rank0.json"));
  // kernels.json: every kernel class with its FLOPs and bytes (the roofline's
  // points); GEMM sits far right of the elementwise kernels.
  json kernel_classes = json::parse(read_file(run + "/kernels.json"));
  std::map<std::string, double> intensity;
  for (const auto& k : kernel_classes) {
    EXPECT_GT(k["flops"].get<double>(), 0) << k.dump();
    EXPECT_GT(k["bytes"].get<double>(), 0) << k.dump();
    EXPECT_GT(k["seconds"].get<double>(), 0) << k.dump();
    intensity[k["class"].get<std::string>()] = k["flops"].get<double>() / k["bytes"].get<double>();
  }
  ASSERT_TRUE(intensity.count("gemm") && intensity.count("layernorm") && intensity.count("optimizer"));
  EXPECT_GT(intensity["gemm"], 10 * intensity["layernorm"]);
  // The report, and the straggler.
  const std::string html = read_file(run + "/report.html");
  EXPECT_NE(html.find("data-series"), std::string::npos);
  EXPECT_NE(r.output.find("[dist] warning"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
  // Communication volume: ZeRO-0 on 2 ranks moves 2 (n-1)/n = 1 x the
  // gradient bytes per step (ring count), and no warning says otherwise.
  EXPECT_EQ(r.output.find("[profile] communication"), std::string::npos) << r.output;
  const auto at = r.output.find(" parameters, ");
  ASSERT_NE(at, std::string::npos);
  const double params = std::stod(r.output.substr(r.output.rfind(' ', at - 1) + 1));
  const std::string metrics = read_file(run + "/metrics.jsonl");
  json first = json::parse(metrics.substr(0, metrics.find('\n')));
  ASSERT_TRUE(first.contains("comm_bytes")) << first.dump();
  const double ratio = first["comm_bytes"].get<double>() / (4 * params);
  EXPECT_GE(ratio, 0.999);
  EXPECT_LT(ratio, 1.1);  // the flat buffer's alignment padding travels too
}

TEST(Observability, LeakWarningFiresOnAnInjectedLeakOnly) {
  TempDir dir("obs_leak");
  const std::string cfg = config(dir, 60);
  auto clean = run_crucible({"train", cfg, "--run-dir", dir / "clean"});
  ASSERT_EQ(clean.code, 0) << clean.output;
  EXPECT_EQ(clean.output.find("[mem] warning"), std::string::npos) << clean.output;
  auto leaky = run_crucible({"train", cfg, "--run-dir", dir / "leaky", "--set",
                             "fault.inject=[\"leak@5:kb=256\"]"});
  ASSERT_EQ(leaky.code, 0) << leaky.output;
  EXPECT_NE(leaky.output.find("[mem] warning"), std::string::npos) << leaky.output;
  EXPECT_NE(leaky.output.find("fault.leak"), std::string::npos) << leaky.output;
}

// GET http://127.0.0.1:port/metrics; "" when nothing answers.
std::string http_get_metrics(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
    if (::write(fd, req.data(), req.size()) == ssize_t(req.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
    }
  }
  ::close(fd);
  return out;
}

// A free TCP port on loopback (bound, read, released).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(Observability, LiveMetricsForPrometheus) {
  TempDir dir("obs_prometheus");
  const int port = free_port();
  // Slowed steps keep the run alive while the endpoint is read.
  std::string cmd = "cd " + dir.path() + " && exec " + std::string(CRUCIBLE_BINARY_DIR) +
                    "/crucible train " + config(dir, 30) + " --run-dir " + dir / "run" +
                    " --metrics-port " + std::to_string(port) +
                    " --set 'fault.inject=[\"slow@1:ms=100\"]' > " + dir / "log" + " 2>&1";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    ::_exit(127);
  }
  std::string text;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    text = http_get_metrics(port);
    if (text.find("crucible_step{") != std::string::npos &&
        text.find("crucible_step{rank=\"0\",run=\"obs\"} 0") == std::string::npos)
      break;  // a step has been recorded
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(dir / "log");
  EXPECT_NE(text.find("200 OK"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE crucible_loss gauge"), std::string::npos) << text;
  for (const char* s : {"crucible_step{", "crucible_tokens_per_second{", "phase=\"forward\"",
                        "kind=\"in_use\"", "run=\"obs\""})
    EXPECT_NE(text.find(s), std::string::npos) << s << "\n" << text;

  // A port that is taken: one line naming it, exit 2.
  int hold = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(::bind(hold, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(hold, 1), 0);
  socklen_t len = sizeof a;
  ::getsockname(hold, reinterpret_cast<sockaddr*>(&a), &len);
  auto taken = run_crucible({"train", config(dir, 2), "--run-dir", dir / "run2", "--metrics-port",
                             std::to_string(ntohs(a.sin_port))});
  ::close(hold);
  EXPECT_EQ(taken.code, 2) << taken.output;
  EXPECT_NE(taken.output.find("[metrics] cannot listen on 127.0.0.1:"), std::string::npos) << taken.output;
}

}  // namespace
}  // namespace crucible::e2e
