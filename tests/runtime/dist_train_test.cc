// Data-parallel training end to end: `crucible launch -n N -- train` (real
// Open MPI processes, oversubscribed on this 2-core machine) against one
// process with the same global batch.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/cli_runner.h"
#include "support/train_config.h"
#include "support/weights.h"

namespace crucible::e2e {
namespace {

using testutil::weight_difference;

namespace fs = std::filesystem;

std::string make_config(const TempDir& dir, int batch) {
  testutil::SmallRun run;
  run.steps = 20;
  run.batch = batch;
  run.seed = 11;
  run.eval_every = 10;
  run.eval_batches = 4;
  run.ckpt_every = 10;
  run.keep = 2;
  run.name = "dp";
  run.sample_tokens = 0;
  run.extra = "[dist]\nbucket_mb = 0.02\n";
  return testutil::write_small_config(dir, run, "cfg_b" + std::to_string(batch) + ".toml");
}

std::vector<double> losses(const std::string& run) {
  std::vector<double> out;
  for (const auto& row : metric_rows(run + "/metrics.jsonl")) out.push_back(row["loss"].get<double>());
  return out;
}

// (step, val_loss) of the evaluation steps.
std::vector<std::pair<int64_t, double>> val_losses(const std::string& run) {
  std::vector<std::pair<int64_t, double>> out;
  for (const auto& j : metric_rows(run + "/metrics.jsonl"))
    if (j.contains("val_loss")) out.push_back({j["step"].get<int64_t>(), j["val_loss"].get<double>()});
  return out;
}

void expect_same_training(const std::string& single, const std::string& multi, double tol) {
  // Validation is on the same tokens for every layout of one global batch.
  auto v1 = val_losses(single), v2 = val_losses(multi);
  ASSERT_EQ(v1.size(), 2u);
  ASSERT_EQ(v2.size(), v1.size());
  for (size_t i = 0; i < v1.size(); ++i) {
    EXPECT_EQ(v2[i].first, v1[i].first);
    EXPECT_NEAR(v2[i].second, v1[i].second, tol * v1[i].second) << "val_loss of step " << v1[i].first;
  }
  auto l1 = losses(single), l2 = losses(multi);
  ASSERT_EQ(l1.size(), 20u);
  ASSERT_EQ(l2.size(), 20u);
  for (size_t i = 0; i < l1.size(); ++i)
    EXPECT_NEAR(l2[i], l1[i], tol * std::fabs(l1[i])) << "loss of step " << i + 1;
  double w = weight_difference(single + "/ckpt/step_0000020/model.safetensors",
                               multi + "/ckpt/step_0000020/model.safetensors");
  EXPECT_LE(w, tol);
  std::printf("[dist test] %s vs %s: weights differ by %.3g (relative L2)\n", single.c_str(),
              multi.c_str(), w);
}

// N ranks x local batch b == 1 rank x N*b, for every ZeRO stage (with the
// tied wte's embedding rows reduced apart).
TEST(DistTrain, TwoRanksEqualOneRankWithTheSameGlobalBatch) {
  TempDir dir("dist_equiv");
  auto one = run_crucible({"train", make_config(dir, 4), "--run-dir", dir / "one"});
  ASSERT_EQ(one.code, 0) << one.output;
  for (int zero : {0, 1, 2}) {
    std::string run = dir / ("two_zero" + std::to_string(zero));
    auto two = run_crucible(launch_train(
        2, {make_config(dir, 2), "--run-dir", run, "--set", "dist.zero=" + std::to_string(zero)}));
    ASSERT_EQ(two.code, 0) << two.output;
    // wte's head gradient rode the overlapped buckets, its embedding rows
    // were reduced apart (parallel/embedding_rows.h), and the run is still
    // the one-rank run.
    EXPECT_NE(two.output.find("wte's embedding rows apart"), std::string::npos) << two.output;
    expect_same_training(dir / "one", run, 1e-5);
    // Every rank records its own step breakdown, exposed communication included.
    std::string rank1 = read_file(run + "/metrics.rank1.jsonl");
    ASSERT_FALSE(rank1.empty());
    auto row = nlohmann::json::parse(rank1.substr(0, rank1.find('\n')));
    EXPECT_TRUE(row.contains("comm_ms"));
  }
}

// Gradient accumulation is a layout of the same global batch too: 1 process
// x 2 micro-batches of 2 == 1 process x 4, validation included.
TEST(DistTrain, AccumulationEqualsOneLargerBatch) {
  TempDir dir("dist_accum");
  auto one = run_crucible({"train", make_config(dir, 4), "--run-dir", dir / "one", "--set",
                           "train.grad_accum=1"});
  ASSERT_EQ(one.code, 0) << one.output;
  auto accum = run_crucible({"train", make_config(dir, 2), "--run-dir", dir / "accum", "--set",
                             "train.grad_accum=2"});
  ASSERT_EQ(accum.code, 0) << accum.output;
  expect_same_training(dir / "one", dir / "accum", 1e-5);
}

TEST(DistTrain, FourRanksZero2EqualOneRank) {
  TempDir dir("dist_equiv4");
  auto one = run_crucible({"train", make_config(dir, 4), "--run-dir", dir / "one"});
  ASSERT_EQ(one.code, 0) << one.output;
  auto four = run_crucible(
      launch_train(4, {make_config(dir, 1), "--run-dir", dir / "four", "--set", "dist.zero=2"}));
  ASSERT_EQ(four.code, 0) << four.output;
  expect_same_training(dir / "one", dir / "four", 1e-5);
}

// A checkpoint written by 2 ranks resumes on 4, then on 1, and the loss
// curve continues as if nothing had changed.
TEST(DistTrain, ReshardingResume2To4To1) {
  TempDir dir("dist_reshard");
  auto one = run_crucible({"train", make_config(dir, 4), "--run-dir", dir / "ref"});
  ASSERT_EQ(one.code, 0) << one.output;
  const std::string run = dir / "run";
  auto a = run_crucible(
      launch_train(2, {make_config(dir, 2), "--run-dir", run, "--stop-at", "7", "--set", "dist.zero=1"}));
  ASSERT_EQ(a.code, 0) << a.output;
  auto b = run_crucible(launch_train(4, {make_config(dir, 1), "--run-dir", run, "--resume", "--stop-at",
                                   "14", "--set", "dist.zero=2"}));
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_NE(b.output.find("written by 2 ranks, now 4"), std::string::npos) << b.output;
  auto c = run_crucible({"train", make_config(dir, 4), "--run-dir", run, "--resume"});
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_NE(c.output.find("written by 4 ranks, now 1"), std::string::npos) << c.output;
  expect_same_training(dir / "ref", run, 1e-5);
}

// dist.reproducible: the same bits for 1, 2 and 4 ranks at the same global
// batch (4 micro-batches of 1 sequence: 1x4, 2x2, 4x1), including across a
// resharding resume.
TEST(DistTrain, ReproducibleModeIsBitIdenticalAcrossWorldSizes) {
  TempDir dir("dist_repro");
  const std::string cfg = make_config(dir, 1);
  auto args = [&](const std::string& run, int accum) {
    return std::vector<std::string>{cfg,
                                    "--run-dir",
                                    run,
                                    "--set",
                                    "dist.reproducible=true",
                                    "--set",
                                    "train.grad_accum=" + std::to_string(accum)};
  };
  std::vector<std::string> one_args = args(dir / "w1", 4);
  one_args.insert(one_args.begin(), "train");
  auto one = run_crucible(one_args);
  ASSERT_EQ(one.code, 0) << one.output;
  auto two = run_crucible(launch_train(2, args(dir / "w2", 2)));
  ASSERT_EQ(two.code, 0) << two.output;
  auto four = run_crucible(launch_train(4, args(dir / "w4", 1)));
  ASSERT_EQ(four.code, 0) << four.output;
  const std::string ref = read_file(dir / "w1/ckpt/step_0000020/model.safetensors");
  ASSERT_FALSE(ref.empty());
  EXPECT_TRUE(read_file(dir / "w2/ckpt/step_0000020/model.safetensors") == ref) << "2 ranks";
  EXPECT_TRUE(read_file(dir / "w4/ckpt/step_0000020/model.safetensors") == ref) << "4 ranks";
  EXPECT_EQ(losses(dir / "w2"), losses(dir / "w1"));

  // 2 -> 4 -> 1 ranks with resumes in between: still the same bits.
  const std::string run = dir / "reshard";
  auto a_args = args(run, 2);
  a_args.insert(a_args.end(), {"--stop-at", "7"});
  ASSERT_EQ(run_crucible(launch_train(2, a_args)).code, 0);
  auto b_args = args(run, 1);
  b_args.insert(b_args.end(), {"--resume", "--stop-at", "14"});
  ASSERT_EQ(run_crucible(launch_train(4, b_args)).code, 0);
  auto c_args = args(run, 4);
  c_args.insert(c_args.begin(), "train");
  c_args.push_back("--resume");
  auto c = run_crucible(c_args);
  ASSERT_EQ(c.code, 0) << c.output;
  EXPECT_TRUE(read_file(run + "/ckpt/step_0000020/model.safetensors") == ref) << "2 -> 4 -> 1";
  EXPECT_EQ(losses(run), losses(dir / "w1"));
}

TEST(DistTrain, DisagreeingConfigsAreRefusedNotHung) {
  TempDir dir("dist_disagree");
  std::string cfg = make_config(dir, 2);
  // Build the dataset once so the failure is the config check's.
  ASSERT_EQ(run_crucible({"train", cfg, "--run-dir", dir / "warm", "--set", "train.steps=1"}).code,
            0);
  std::string bin = std::string(CRUCIBLE_BINARY_DIR) + "/crucible";
  std::string common = " --allow-run-as-root --oversubscribe --mca btl self,vader --bind-to none";
  std::string cmd = "cd " + dir.path() + " && timeout 120 mpirun" + common + " -n 1 " + bin +
                    " train " + cfg + " --run-dir " + dir / "run" + " --set train.seed=5 : -n 1 " +
                    bin + " train " + cfg + " --run-dir " + dir / "run" +
                    " --set train.seed=6 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  int status = ::pclose(p);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0) << out;
  EXPECT_NE(WEXITSTATUS(status), 124) << "timed out: the ranks hung\n" << out;
  EXPECT_NE(out.find("rank 1's config differs from rank 0's: train.seed = 6, rank 0 has 5"),
            std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(dir / "run/ckpt")) << "nothing may be written";
}

}  // namespace
}  // namespace crucible::e2e
