// `crucible train --set run.device=cuda` as a user runs it, on the README's
// embedded default (one rank, the GPU machine's one GPU):
//  - 300 bf16 steps on the GPU track the same run on the CPU: every step's
//    loss after the first 10 within 0.05, the final validation loss within
//    0.03 (issue: "tracks the CPU run's loss curve");
//  - stopped at a step and resumed, the GPU run is the same run: the final
//    weights equal an uninterrupted GPU run's byte for byte (deterministic
//    kernels, no atomics).
// Both run the packed crucible on the GPU machine (CRUCIBLE_BIN,
// scripts/gpu_check.sh); without a GPU they skip.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gpu/gpu_support.h"
#include "support/cli_runner.h"

namespace crucible::e2e {
namespace {

std::vector<std::string> default_train(const std::string& run_dir, const std::string& device, int steps,
                                       std::vector<std::string> more = {}) {
  std::vector<std::string> a = {"train", "--run-dir", run_dir, "--set", "train.steps=" + std::to_string(steps),
                                "--set", "run.sample_tokens=0", "--set", "run.device=" + device};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

double final_val_loss(const std::string& run) {
  double v = NAN;
  for (const nlohmann::json& r : metric_rows(run + "/metrics.jsonl"))
    if (r.contains("val_loss")) v = r["val_loss"].get<double>();
  return v;
}

TEST(GpuTrain, Bf16TracksTheCpuRunOfTheDefault) {
  REQUIRE_GPU();
  TempDir dir("gpu_train_track");
  const std::vector<std::string> bf16 = {"--set", "train.precision=bf16"};
  auto cpu = run_crucible(default_train(dir / "cpu", "cpu", 300, bf16), dir.path());
  ASSERT_EQ(cpu.code, 0) << cpu.output;
  auto gpu = run_crucible(default_train(dir / "gpu", "cuda", 300, bf16), dir.path());
  ASSERT_EQ(gpu.code, 0) << gpu.output;
  const auto c = step_losses(dir / "cpu"), g = step_losses(dir / "gpu");
  ASSERT_EQ(c.size(), g.size());
  for (const auto& [step, loss] : c)
    if (step > 10) {
      EXPECT_NEAR(g.at(step), loss, 0.05) << "step " << step;
    }
  EXPECT_NEAR(final_val_loss(dir / "gpu"), final_val_loss(dir / "cpu"), 0.03);
}

TEST(GpuTrain, StoppedAndResumedIsTheSameRun) {
  REQUIRE_GPU();
  TempDir dir("gpu_train_resume");
  const std::vector<std::string> every = {"--set", "ckpt.every=10"};
  auto whole = run_crucible(default_train(dir / "whole", "cuda", 30, every), dir.path());
  ASSERT_EQ(whole.code, 0) << whole.output;
  std::vector<std::string> stop = every;
  stop.insert(stop.end(), {"--stop-at", "20"});
  auto first = run_crucible(default_train(dir / "split", "cuda", 30, stop), dir.path());
  ASSERT_EQ(first.code, 0) << first.output;
  auto resumed = run_crucible({"train", "--resume", "--run-dir", dir / "split"}, dir.path());
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  const std::string w = "/ckpt/step_0000030/model.safetensors";
  EXPECT_EQ(read_file(dir / "whole" + w), read_file(dir / "split" + w)) << "the final weights differ";
}

// run.cuda_graphs (docs/gpu.md "CUDA graphs"): the default job with its
// steady steps replayed from a graph is the job launched kernel by kernel,
// byte for byte, and metrics.jsonl says which steps ran as the graph: not the
// first (it allocates what a step needs), the second (captured, then
// launched as the graph), not the trace window's (steps 3-5:
// run.trace_from = 3; their kernels are timed), every one after (replayed).
TEST(GpuTrain, GraphsOnAndOffAreTheSameRun) {
  REQUIRE_GPU();
  TempDir dir("gpu_train_graphs");
  auto on = run_crucible(default_train(dir / "on", "cuda", 20, {"--set", "ckpt.every=20"}), dir.path());
  ASSERT_EQ(on.code, 0) << on.output;
  auto off = run_crucible(
      default_train(dir / "off", "cuda", 20, {"--set", "ckpt.every=20", "--set", "run.cuda_graphs=false"}),
      dir.path());
  ASSERT_EQ(off.code, 0) << off.output;
  EXPECT_NE(on.output.find("replayed as a CUDA graph"), std::string::npos) << on.output;
  EXPECT_EQ(on.output.find("without CUDA graphs"), std::string::npos) << on.output;
  const std::string w = "/ckpt/step_0000020/model.safetensors";
  EXPECT_EQ(read_file(dir / "on" + w), read_file(dir / "off" + w)) << "the final weights differ";
  for (const nlohmann::json& r : metric_rows(dir / "on/metrics.jsonl")) {
    if (!r.contains("loss")) continue;
    const int64_t step = r["step"].get<int64_t>();
    EXPECT_EQ(r.contains("graph_ms"), step == 2 || step >= 6) << "step " << step;
    // Every step is split into parts timed on the GPU, the graph's by its own
    // events.
    EXPECT_GT(r.value("backward_ms", 0.0), 0) << "step " << step;
  }
  for (const nlohmann::json& r : metric_rows(dir / "off/metrics.jsonl")) EXPECT_FALSE(r.contains("graph_ms"));
}

// A model larger than the GPU's free memory is refused before anything is
// allocated or written: one line naming the GPU's memory, exit 2, no run
// directory (issue: "out of device memory, checked before allocating").
TEST(GpuTrain, AModelLargerThanTheGpuIsOneLineAndExit2) {
  REQUIRE_GPU();
  TempDir dir("gpu_train_too_large");
  auto r = run_crucible(default_train(dir / "big", "cuda", 10,
                                      {"--set", "model.n_layer=96", "--set", "model.n_head=96", "--set",
                                       "model.n_embd=12288"}),
                        dir.path());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("is free on cuda:0"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "big")) << r.output;
}

}  // namespace
}  // namespace crucible::e2e
