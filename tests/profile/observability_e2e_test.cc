// Observability end to end: a training run's trace.json (one process per
// rank, valid nesting), report.html, the straggler warning naming an
// injected slow rank, and the leak warning firing on an injected leak and
// staying quiet on a clean run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
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

}  // namespace
}  // namespace crucible::e2e
