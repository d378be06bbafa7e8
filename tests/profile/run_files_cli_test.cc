// The files a run directory holds, damaged, as `crucible report` and
// `crucible train` meet them (issue 32, items 7 and 8): each reader checks
// types and ranges through its format's schema before use, so a bad field is
// one line naming it and exit 2 (the run's own files), or one line and the
// file ignored (a probe.json the run only consults), never an internal error.
#include <gtest/gtest.h>

#include <filesystem>
#include <tuple>
#include <nlohmann/json.hpp>

#include "support/cli_runner.h"
#include "support/train_config.h"

namespace crucible::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string small_config(const TempDir& dir) {
  testutil::SmallRun run;
  run.steps = 4;
  run.batch = 2;
  run.accum = 1;
  run.eval_every = 0;
  run.ckpt_every = 0;
  run.sample_tokens = 0;
  run.name = "files";
  return testutil::write_small_config(dir, run);
}

void expect_one_line(const CliResult& r, int code, const std::string& what) {
  EXPECT_EQ(r.code, code) << r.output;
  EXPECT_NE(r.output.find(what), std::string::npos) << r.output;
  std::string out = r.output;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  EXPECT_EQ(out.find('\n'), std::string::npos) << "more than one line:\n" << r.output;
}

TEST(RunFilesCli, ReportRefusesADamagedTraceOrPlanWithOneLine) {
  TempDir dir("run_files_report");
  const std::string cfg = small_config(dir), run = dir / "run";
  auto trained = run_crucible({"train", cfg, "--run-dir", run});
  ASSERT_EQ(trained.code, 0) << trained.output;
  ASSERT_TRUE(fs::exists(run + "/trace.json") && fs::exists(run + "/plan.json"));
  ASSERT_EQ(run_crucible({"report", run, "-o", dir / "ok.html"}).code, 0);
  const std::string trace = read_file(run + "/trace.json"), plan = read_file(run + "/plan.json"),
                    metrics = read_file(run + "/metrics.jsonl");

  for (const char* bad :
       {R"({"traceEvents":5})", "[5]",
        R"({"traceEvents":[{"name":"x","ph":"X","ts":"1","pid":0,"tid":0,"dur":1}]})"}) {
    write_file(run + "/trace.json", bad);
    SCOPED_TRACE(bad);
    expect_one_line(run_crucible({"report", run, "-o", dir / "r.html"}), 2,
                    "[report] " + run + "/trace.json: ");
  }
  fs::remove(run + "/trace.json");
  fs::create_directory(run + "/trace.json");
  expect_one_line(run_crucible({"report", run, "-o", dir / "r.html"}), 2,
                  "trace.json: not a regular file");
  fs::remove(run + "/trace.json");
  write_file(run + "/trace.json", trace);

  json p = json::parse(plan);
  p["breakdown"] = json::array({1, 2});
  write_file(run + "/plan.json", p.dump());
  expect_one_line(run_crucible({"report", run, "-o", dir / "r.html"}), 2,
                  "[report] " + run + "/plan.json: breakdown must be an object, not an array");
  p = json::parse(plan);
  p["cluster"] = {{"name", 5}};
  write_file(run + "/plan.json", p.dump());
  expect_one_line(run_crucible({"report", run, "-o", dir / "r.html"}), 2,
                  "plan.json: cluster.name must be a string");
  write_file(run + "/plan.json", plan);

  json row = json::parse(metrics.substr(0, metrics.find('\n')));
  row["step_ms"] = 1e308;
  write_file(run + "/metrics.jsonl", row.dump() + "\n" + metrics);
  expect_one_line(run_crucible({"report", run, "-o", dir / "r.html"}), 2,
                  "metrics.jsonl row 1: step_ms = 1e+308 is out of range");
  write_file(run + "/metrics.jsonl", metrics);
  for (const auto& [file, text, line] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"memory.json", R"({"weights": "x"})", "memory.json: weights must be a number, not a string"},
           {"kernels.json", "[5]", "kernels.json: [0] must be an object, not an integer"},
           {"events.jsonl", "{\"event\": 5}\n", "events.jsonl row 1: event must be a string"}}) {
    const std::string path = run + "/" + file, saved = fs::exists(path) ? read_file(path) : "";
    write_file(path, text);
    expect_one_line(run_crucible({"report", run, "-o", dir / "r.html"}), 2, line);
    if (saved.empty()) fs::remove(path);
    else write_file(path, saved);
  }
  EXPECT_FALSE(fs::exists(dir / "r.html"));

  // A probe.json the run only consults: left out of the report, which says why.
  write_file(run + "/probe.json", R"({"schema": "crucible-probe/1", "compute": 5})");
  auto consulted = run_crucible({"report", run, "-o", dir / "r.html"});
  EXPECT_EQ(consulted.code, 0) << consulted.output;
  EXPECT_NE(read_file(dir / "r.html").find("compute must be an object, not an integer (ignored)"),
            std::string::npos);
}

// A probe.json in the working directory whose fields have the wrong type
// made every `train` there fail with a json::type_error (exit 1): now the
// run says so in one line and trains without it.
TEST(RunFilesCli, TrainIgnoresABadProbeWithOneLine) {
  TempDir dir("run_files_train");
  const std::string cfg = small_config(dir);
  const json good = json::parse(
      read_file(std::string(CRUCIBLE_SOURCE_DIR) + "/fuzz/corpus/probe/two_ranks.json"));
  struct Case {
    const char* pointer;
    json value;
    const char* line;
  };
  int i = 0;
  for (const Case& c : std::vector<Case>{
           {"/compute", 5, "[probe] probe.json: compute must be an object, not an integer"},
           {"/compute/gemm/0", 7, "compute.gemm[0] must be an object, not an integer"},
           {"/compute/gemm/0/threads", "2", "compute.gemm[0].threads must be an integer"},
           {"/compute/gemm/0/gflops", 1e308, "compute.gemm[0].gflops = 1e+308"}}) {
    json doc = good;
    doc[json::json_pointer(c.pointer)] = c.value;
    write_file(dir / "probe.json", doc.dump());
    auto r =
        run_crucible({"train", cfg, "--run-dir", dir / ("run" + std::to_string(i++))}, dir.path());
    SCOPED_TRACE(c.pointer);
    EXPECT_EQ(r.code, 0) << r.output;
    size_t lines = 0;
    for (size_t at = r.output.find(c.line); at != std::string::npos;
         at = r.output.find(c.line, at + 1))
      ++lines;
    EXPECT_EQ(lines, 1u) << r.output;
  }
}

}  // namespace
}  // namespace crucible::e2e
