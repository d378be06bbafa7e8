// `crucible plan` as a user runs it, and the closed loop on the README's own
// path: the embedded default trained in a directory that holds this
// machine's cluster file (from a probe document), interrupted and resumed,
// stores its prediction (RUN/plan.json) before the first step, the report
// sets it beside the measurement, and `--calibrate` on the run brings the
// error down.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "support/cli_runner.h"
#include "support/files.h"

namespace crucible::e2e {
namespace {

namespace fs = std::filesystem;

std::string cluster(const char* name) { return std::string(CRUCIBLE_SOURCE_DIR) + "/configs/clusters/" + name + ".toml"; }
std::string config(const char* name) { return std::string(CRUCIBLE_SOURCE_DIR) + "/configs/" + name + ".toml"; }

// One line on stderr, exit 2, naming `what`.
void expect_bad_input(const CliResult& r, const std::string& what) {
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(what), std::string::npos) << r.output;
  std::string out = r.output;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  EXPECT_EQ(out.find('\n'), std::string::npos) << "more than one line:\n" << r.output;
}

TEST(PlanCli, SearchesAndEvaluatesLayoutsOnTheShippedClusters) {
  auto r = run_crucible({"plan", config("gpt2-124M"), "--cluster", cluster("dgx-a100"), "--devices", "16",
                         "--global-batch", "64", "--top", "3", "--json"});
  ASSERT_EQ(r.code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["best"].size(), 3u);
  EXPECT_GT(j["evaluated"].get<int>(), 3);
  for (const auto& p : j["best"]) {
    EXPECT_EQ(p["layout"]["devices"].get<int>(), 16);
    EXPECT_EQ(p["layout"]["global_batch"].get<int>(), 64);
    for (const char* k : {"step_time_s", "tokens_per_s", "mfu", "peak_memory_bytes", "breakdown", "memory"})
      EXPECT_TRUE(p.contains(k)) << k;
  }
  EXPECT_LE(j["best"][0]["step_time_s"].get<double>(), j["best"][1]["step_time_s"].get<double>());

  // One layout: every field given, dp from the devices, m from the global batch.
  r = run_crucible(
      {"plan", config("gpt2-124M"), "--cluster", cluster("dgx-h100"), "--devices", "16",
       "--global-batch", "64", "--json", "--layout",
       "tp=2,pp=2,mb=2,zero=1,recompute=selective,sp=true,schedule=interleaved,v=2,precision=bf16,"
       "fused_head=false"});
  ASSERT_EQ(r.code, 0) << r.output;
  const auto one = nlohmann::json::parse(r.output);
  EXPECT_EQ(one["layout"]["dp"].get<int>(), 4);
  EXPECT_EQ(one["layout"]["m"].get<int>(), 8);
  EXPECT_TRUE(one["runs"].get<bool>());
  double sum = 0;
  for (const auto& [k, v] : one["breakdown"].items()) sum += v.get<double>();
  EXPECT_NEAR(sum, one["step_time_s"].get<double>(), 1e-12);
  uint64_t mem = 0;
  for (const char* k : {"weights", "gradients", "optimizer", "activations", "other"}) mem += one["memory"][k].get<uint64_t>();
  EXPECT_EQ(mem, one["peak_memory_bytes"].get<uint64_t>());
}

TEST(PlanCli, BadInputIsOneLineAndExitTwo) {
  TempDir dir("plan_cli_bad");
  testutil::write_file(dir / "broken.toml", "name = \"x\"\nnodes = 1\ndevices_per_node = 1\nbogus = 3\n");
  expect_bad_input(run_crucible({"plan", "--cluster", dir / "broken.toml"}), "bogus: unknown key");
  expect_bad_input(run_crucible({"plan", "--cluster", dir / "missing.toml"}), "missing.toml does not exist");
  expect_bad_input(run_crucible({"plan", "--cluster", cluster("dgx-a100"), "--devices", "8", "--layout", "tp=3"}),
                   "does not divide --devices 8");
  expect_bad_input(run_crucible({"plan", "--cluster", cluster("dgx-a100"), "--devices", "6", "--layout", "tp=3"}),
                   "model.n_head = 4 does not divide by tp = 3");
  expect_bad_input(run_crucible({"plan", "--cluster", cluster("dgx-a100"), "--layout", "tq=2"}), "'tq': unknown key");
  expect_bad_input(run_crucible({"plan", "--cluster", cluster("dgx-a100"), "--layout", "recompute=some"}),
                   "recompute: 'some' is not one of none, selective, full");
  expect_bad_input(run_crucible({"plan", "--cluster", cluster("dgx-a100"), "--devices", "8", "--global-batch", "8",
                                 "--layout", "mb=100000"}),
                   "does not divide");
  // One that does not fit is predicted anyway, and says so.
  auto big = run_crucible(
      {"plan", "--cluster", cluster("dgx-a100"), "--layout",
       "tp=1,pp=1,v=1,mb=65536,zero=0,recompute=none,sp=false,schedule=1f1b,precision=fp32,"
       "fused_head=false",
       "--json"});
  EXPECT_EQ(big.code, 0) << big.output;
  EXPECT_NE(big.output.find("[plan] warning: dp=1,tp=1,pp=1,v=1,mb=65536"), std::string::npos) << big.output;
  EXPECT_NE(big.output.find("does not fit"), std::string::npos) << big.output;
  EXPECT_NE(big.output.find("\"fits\": false"), std::string::npos) << big.output;
  EXPECT_NE(big.output.find("\"step_time_s\""), std::string::npos) << big.output;
  expect_bad_input(run_crucible({"plan", "--set", "model.n_embd=250", "--cluster", cluster("dgx-a100")}),
                   "model.n_embd");
  expect_bad_input(run_crucible({"plan", "--cluster-from-probe", dir / "broken.toml"}), "broken.toml");
  // What a red-team pass found: products past int, a schedule too long to
  // build, special files, wrong JSON types, outputs that cannot be written.
  expect_bad_input(run_crucible({"plan", "--cluster", cluster("dgx-a100"), "--layout", "tp=65536,pp=65536"}),
                   "more than 16777216");
  expect_bad_input(run_crucible({"plan", "--cluster", cluster("dgx-a100"), "--layout",
                                 "dp=65536,tp=65537", "--devices", "65536"}),
                   "dp x tp = 4295032832 devices is more than 16777216");
  expect_bad_input(run_crucible({"plan", "--cluster", cluster("dgx-a100"), "--layout", "dp=3,tp=2",
                                 "--devices", "8"}),
                   "dp x tp = 6 does not divide --devices 8");
  expect_bad_input(run_crucible({"plan", "--cluster", cluster("dgx-a100"), "--devices", "8",
                                 "--global-batch", "1099511627776", "--layout", "dp=8"}),
                   "more micro-batches per step than the planner's limit of 65536");
  expect_bad_input(run_crucible({"plan", "--cluster", cluster("dgx-a100"), "--devices", "2",
                                 "--global-batch", "2000000", "--layout", "pp=2,mb=1"}),
                   "with pp=2,mb=1 runs on 2 devices of dgx-a100 with a global batch of 2000000: "
                   "more micro-batches "
                   "per step than the planner's limit of 65536 (");
  expect_bad_input(run_crucible({"plan", "--cluster", cluster("dgx-a100"), "--layout", "tp=2,tp=4"}), "given twice");
  expect_bad_input(run_crucible({"plan", "--cluster", "/dev/zero"}), "is not a regular file");
  expect_bad_input(run_crucible({"plan", "--cluster", dir.path()}), "is not a regular file");
  std::string huge = read_file(cluster("dgx-a100"));
  const size_t at = huge.find("memory_gb = 80");
  ASSERT_NE(at, std::string::npos);
  testutil::write_file(dir / "huge.toml", huge.replace(at, 14, "memory_gb = 1e12"));
  expect_bad_input(run_crucible({"plan", "--cluster", dir / "huge.toml"}), "device.memory_gb: 1e+12 is out of range");
  testutil::write_file(
      dir / "typed.json",
      R"({"schema": "crucible-probe/1", "compute": {"peak": {"measured_fma_gflops_all": 100},)"
      R"( "gemm": [{"name": "s", "m": "x", "n": 1, "k": 1, "dtype": "f32", "threads": 1, "gflops": 1, "valid": true}]},)"
      R"( "memory": {"threads_all": {"triad": {"best_gbs": 10}}}})");
  expect_bad_input(
      run_crucible({"plan", "--cluster-from-probe", dir / "typed.json", "-o", dir / "c.toml"}),
      "[probe] " + (dir / "typed.json") + ": compute.gemm[0].m must be an integer, not a string");
  expect_bad_input(run_crucible({"plan", "--cluster-from-probe", dir / "typed.json", "-o",
                                 dir / "no/such/c.toml"}),
                   "does not exist");
  expect_bad_input(
      run_crucible({"plan", "--cluster-from-probe", dir / "typed.json", "-o", dir.path()}),
      "is a directory");
  EXPECT_FALSE(fs::exists(dir / "c.toml"));
  expect_bad_input(run_crucible({"plan", "--calibrate", dir / "no_run", "--cluster", cluster("dgx-a100")}),
                   "no such run directory");
  // The same products in the trainer's own config check (a SIGFPE before).
  expect_bad_input(run_crucible({"train", "--set", "dist.tp=65536", "--set", "dist.pp=65536"}, dir.path()),
                   "dist.tp x dist.pp: 4294967296 ranks is more than 16777216");
  expect_bad_input(run_crucible({"train", "--set", "dist.pp=4096", "--set", "dist.pp_virtual=1048576", "--set",
                                 "dist.pp_schedule=interleaved"},
                                dir.path()),
                   "fewer blocks than pp x pp_virtual = 4294967296 stages");
  // No cluster description at hand.
  expect_bad_input(run_crucible({"plan"}, dir.path()), "no cluster description");
}

// Values in range for JSON but not for a machine are refused when read, and
// no cluster file that `--cluster` would refuse is ever written (issue 32:
// step_ms 1e308 became step_overhead_ms = 1e+308, gflops 1e308 a peak of inf).
TEST(PlanCli, OutOfRangeFiguresAreRefusedWhenReadAndNoUnreadableClusterIsWritten) {
  TempDir dir("plan_cli_ranges");
  fs::create_directories(dir / "run");
  testutil::write_file(dir / "run/config.toml", read_file(config("tiny")));
  std::string rows;
  for (int step = 1; step <= 6; ++step)
    rows += "{\"step\": " + std::to_string(step) +
            ", \"loss\": 5, \"lr\": 0.001, \"step_ms\": " + (step == 5 ? "1e308" : "120.5") +
            ", \"forward_ms\": 40, \"backward_ms\": 70, \"optimizer_ms\": 5}\n";
  testutil::write_file(dir / "run/metrics.jsonl", rows);
  auto cal = run_crucible(
      {"plan", "--calibrate", "run", "--cluster", cluster("dgx-a100"), "-o", "cal.toml"},
      dir.path());
  expect_bad_input(cal, "run/metrics.jsonl:5: step_ms = 1e+308 is out of range");
  EXPECT_FALSE(fs::exists(dir / "cal.toml"));
  // The same run with a sane row calibrates, and what it writes reads back.
  testutil::write_file(dir / "run/metrics.jsonl",
                       std::string(rows).replace(rows.find("1e308"), 5, "121.0"));
  auto ok = run_crucible(
      {"plan", "--calibrate", "run", "--cluster", cluster("dgx-a100"), "-o", "cal.toml"},
      dir.path());
  ASSERT_EQ(ok.code, 0) << ok.output;
  EXPECT_EQ(run_crucible({"plan", "--cluster", "cal.toml", "--layout", "mb=4"}, dir.path()).code,
            0);

  const std::string probe = read_file(std::string(CRUCIBLE_SOURCE_DIR) +
                                      "/fuzz/corpus/probe/regression-gflops-1e308.json");
  testutil::write_file(dir / "probe.json", probe);
  expect_bad_input(
      run_crucible({"plan", "--cluster-from-probe", "probe.json", "-o", "c.toml"}, dir.path()),
      "[probe] probe.json: compute.gemm[0].gflops = 1e+308 is out of range [0, 1e+08]");
  EXPECT_FALSE(fs::exists(dir / "c.toml"));
  // A probe.json beside a plan is consulted: the bad one is named, and no
  // time is predicted from it.
  expect_bad_input(run_crucible({"plan", config("tiny")}, dir.path()),
                   "compute.gemm[0].gflops = 1e+308");
}

// A GPU run replayed from CUDA graphs: its steps from the third on have
// graph_ms and no phases (0 ms forward, backward and optimizer). Calibrating
// on it fits its device step, and is not misled by the zeros into GEMMs
// that take no time.
TEST(PlanCli, CalibratingOnARunReplayedFromCudaGraphsFitsItsDeviceStep) {
  TempDir dir("plan_cli_graphs");
  fs::create_directories(dir / "run");
  std::string toml = read_file(config("tiny"));
  toml.replace(toml.find("[run]\n"), 6, "[run]\ndevice = \"cuda\"\n");
  testutil::write_file(dir / "run/config.toml", toml);
  std::string rows;
  for (int step = 1; step <= 20; ++step)
    rows += "{\"step\": " + std::to_string(step) + ", \"loss\": 5, \"lr\": 0.001, \"step_ms\": 12.0, " +
            (step <= 2 ? "\"forward_ms\": 1, \"backward_ms\": 2, \"optimizer_ms\": 9}\n"
                       : "\"forward_ms\": 0, \"backward_ms\": 0, \"optimizer_ms\": 0, \"graph_ms\": 11.0}\n");
  testutil::write_file(dir / "run/metrics.jsonl", rows);
  auto cal = run_crucible({"plan", "--calibrate", "run", "--cluster", cluster("dgx-h100"), "-o", "cal.toml"},
                          dir.path());
  ASSERT_EQ(cal.code, 0) << cal.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(cal.output, m, std::regex(R"(: ([0-9.]+)% before, ([0-9.]+)% after)")))
      << cal.output;
  EXPECT_GT(std::stod(m[1]), 20) << "the datasheet file already predicted the run: the test proves nothing";
  EXPECT_LT(std::stod(m[2]), 2) << cal.output;
  // The 11 ms device step went into compute and the optimizer: what is left
  // for the step's overhead is the 1 ms the host added around the graph (a
  // fit that read the zeros as phases put all 10+ ms there).
  ASSERT_TRUE(std::regex_search(cal.output, m, std::regex(R"(step overhead ([0-9.]+) ms)"))) << cal.output;
  EXPECT_NEAR(std::stod(m[1]), 1.0, 0.5) << cal.output;
  // What it writes is a cluster file the planner reads back.
  auto again = run_crucible({"plan", "--cluster", "cal.toml", "--layout", "mb=4"}, dir.path());
  EXPECT_EQ(again.code, 0) << again.output;
}

// A 70B model (Llama-2 70B's shape in GPT form) as the issue tried it.
std::string seventy_b(const TempDir& dir) {
  testutil::write_file(
      dir / "llama-70b.toml",
      "[model]\nn_layer = 80\nn_head = 64\nn_embd = 8192\nvocab_size = 32000\nseq_len = 4096\n");
  return dir / "llama-70b.toml";
}

// plan --layout with fields left out searches them: the 70B case, whose
// micro-batch size the config's 8 made impossible ("1 micro-batches are
// fewer than pp = 2 stages"), returns its best layouts with tp, pp and dp as
// given and says which fields it chose, in text and JSON.
TEST(PlanCli, APartialLayoutSearchesTheFieldsLeftOut) {
  TempDir dir("plan_cli_partial");
  const std::string cfg = seventy_b(dir);
  const std::vector<std::string> args = {
      "plan",           cfg,   "--cluster", cluster("dgx-h100"), "--devices", "768",
      "--global-batch", "384", "--layout",  "tp=8,pp=2,dp=48",   "--top",     "3"};
  auto text = run_crucible(args);
  ASSERT_EQ(text.code, 0) << text.output;
  // The header names the model by its file, not "tiny".
  EXPECT_NE(text.output.find("llama-70b on 768 devices of dgx-h100, global batch 384"),
            std::string::npos)
      << text.output;
  EXPECT_EQ(text.output.find("tiny"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find(
                "given tp=8,pp=2,dp=48, chosen v, mb, m, zero, recompute, sp, schedule, precision, "
                "fused_head; best first"),
            std::string::npos)
      << text.output;
  EXPECT_NE(text.output.find(" 1. dp=48,tp=8,pp=2,"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find(" 3. dp=48,tp=8,pp=2,"), std::string::npos) << text.output;

  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  auto js = run_crucible(json_args);
  ASSERT_EQ(js.code, 0) << js.output;
  const auto j = nlohmann::json::parse(js.output);
  EXPECT_EQ(j["given"], nlohmann::json({"tp", "pp", "dp"}));
  EXPECT_EQ(j["chosen"], nlohmann::json({"v", "mb", "m", "zero", "recompute", "sp", "schedule",
                                         "precision", "fused_head"}));
  ASSERT_EQ(j["best"].size(), 3u);
  for (const auto& p : j["best"]) {
    EXPECT_TRUE(p["runs"].get<bool>());
    EXPECT_EQ(p["layout"]["tp"], 8);
    EXPECT_EQ(p["layout"]["pp"], 2);
    EXPECT_EQ(p["layout"]["dp"], 48);
    EXPECT_EQ(p["layout"]["global_batch"], 384);
    EXPECT_GE(p["layout"]["m"].get<int>(), 2) << "a pipeline of 2 needs 2 micro-batches";
  }
  EXPECT_LE(j["best"][0]["step_time_s"].get<double>(), j["best"][2]["step_time_s"].get<double>());
  // The same fields and a micro-batch size that cannot fill the pipeline:
  // nothing runs, said in one line with the reason.
  expect_bad_input(run_crucible({"plan", cfg, "--cluster", cluster("dgx-h100"), "--devices", "768",
                                 "--global-batch", "384", "--layout", "tp=8,pp=2,dp=48,mb=8"}),
                   "too few micro-batches for the pipeline");
  // The embedded default is named by its size.
  auto tiny =
      run_crucible({"plan", "--cluster", cluster("dgx-a100"), "--devices", "8", "--top", "1"});
  ASSERT_EQ(tiny.code, 0) << tiny.output;
  EXPECT_EQ(tiny.output.rfind("5.3M-parameter GPT on 8 devices of dgx-a100", 0), 0u) << tiny.output;
}

// Item 10's small refusals: an empty layout field, sequence parallelism
// without tensor parallelism, and --cluster-from-probe with plan options it
// would drop (leaving a cluster.toml behind that later runs pick up).
TEST(PlanCli, MalformedLayoutsAndMixedModesAreOneLine) {
  TempDir dir("plan_cli_refusals");
  expect_bad_input(
      run_crucible({"plan", "--cluster", cluster("dgx-a100"), "--layout", "tp=2,,pp=1"}),
      "[plan] layout 'tp=2,,pp=1': an empty field");
  expect_bad_input(run_crucible({"plan", "--cluster", cluster("dgx-a100"), "--layout", "tp=2,"}),
                   "an empty field");
  expect_bad_input(run_crucible({"plan", "--cluster", cluster("dgx-a100"), "--layout", ""}),
                   "an empty field");
  expect_bad_input(
      run_crucible({"plan", "--cluster", cluster("dgx-a100"), "--layout", "sp=true,tp=1"}),
      "[plan] layout sp: true needs tp > 1");
  testutil::write_file(
      dir / "probe.json",
      R"({"schema": "crucible-probe/1", "compute": {"peak": {"measured_fma_gflops_all": 100}}})");
  expect_bad_input(
      run_crucible({"plan", "--cluster-from-probe", "probe.json", "--layout", "tp=1"}, dir.path()),
      "[plan] --cluster-from-probe only writes a cluster file");
  expect_bad_input(
      run_crucible({"plan", config("tiny"), "--cluster-from-probe", "probe.json", "--devices", "2"},
                   dir.path()),
      "takes no config, --devices");
  EXPECT_FALSE(fs::exists(dir / "cluster.toml"))
      << "a refused call left a cluster file for later runs";
}

TEST(PlanCli, TheDefaultRunStoresItsPredictionAndCalibrationLowersTheError) {
  TempDir dir("plan_closed_loop");
  // This machine's cluster file, from its own (quick, compute and memory) probe.
  auto probe = run_crucible({"probe", "--quick", "--sections", "compute,memory", "--json", "probe.json"}, dir.path());
  ASSERT_EQ(probe.code, 0) << probe.output;
  auto made = run_crucible({"plan", "--cluster-from-probe", "probe.json"}, dir.path());
  ASSERT_EQ(made.code, 0) << made.output;
  ASSERT_TRUE(fs::exists(dir / "cluster.toml"));

  // The embedded default, stopped after step 4 and resumed to 8.
  const std::vector<std::string> train = {"train", "--run-dir", "runs/r", "--set", "train.steps=8", "--set",
                                          "ckpt.every=4", "--set", "train.eval_every=0", "--set", "run.sample_tokens=0"};
  std::vector<std::string> first = train;
  first.insert(first.end(), {"--stop-at", "4"});
  auto a = run_crucible(first, dir.path());
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_NE(a.output.find("[plan] predicted"), std::string::npos) << a.output;
  const std::string stored = read_file(dir / "runs/r/plan.json");
  auto b = run_crucible({"train", "--resume", "--run-dir", "runs/r"}, dir.path());
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_NE(b.output.find("[ckpt] resumed from"), std::string::npos) << b.output;
  EXPECT_EQ(read_file(dir / "runs/r/plan.json"), stored) << "the resumed run predicts another run";
  const auto plan = nlohmann::json::parse(stored);
  EXPECT_EQ(plan["layout_text"].get<std::string>(), "dp=1,tp=1,pp=1,v=1,mb=8,m=1,zero=0,recompute=none,sp=false,schedule=1f1b,precision=fp32");
  EXPECT_GT(plan["step_time_s"].get<double>(), 0);
  EXPECT_EQ(plan["cluster"]["source"].get<std::string>(), "cluster.toml");
  const std::string html = read_file(dir / "runs/r/report.html");
  EXPECT_NE(html.find("<section id=\"prediction\">"), std::string::npos);

  auto cal = run_crucible({"plan", "--calibrate", "runs/r", "-o", "calibrated.toml"}, dir.path());
  ASSERT_EQ(cal.code, 0) << cal.output;
  const size_t at = cal.output.find("median |error| of the step time: ");
  ASSERT_NE(at, std::string::npos) << cal.output;
  double before = 0, after = 0;
  ASSERT_EQ(std::sscanf(cal.output.c_str() + at, "median |error| of the step time: %lf%% before, %lf%% after", &before,
                        &after),
            2)
      << cal.output;
  EXPECT_LT(after, 5.0) << cal.output;  // one run: the refit reproduces it
  EXPECT_LE(after, before) << cal.output;
  // The calibrated file is a cluster file the planner reads back.
  auto again = run_crucible({"plan", "--cluster", "calibrated.toml", "--layout", "mb=8", "--json"}, dir.path());
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_EQ(nlohmann::json::parse(again.output)["best"][0]["layout"]["mb"], 8) << again.output;
}

}  // namespace
}  // namespace crucible::e2e
