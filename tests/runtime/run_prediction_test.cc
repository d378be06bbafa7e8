// A run's own prediction (runtime/plan_run.h run_prediction, plan.json)
// describes the stack the run has: a single rank's GPU step replays a CUDA
// graph (run.cuda_graphs), so its launches cost one per chunk and direction;
// with graphs off, or with several ranks, every kernel's launch counts.
#include <gtest/gtest.h>

#include "kernels/cuda/cuda.h"
#include "plan/cluster.h"
#include "runtime/config.h"
#include "runtime/plan_run.h"

namespace crucible::runtime {
namespace {

TEST(RunPrediction, AGpuRunsPredictionKnowsItsStepIsAGraph) {
  if (!kernels::cuda::compiled()) GTEST_SKIP() << "built without the CUDA backend: no run's step is a graph";
  auto cluster =
      plan::load_cluster(std::string(CRUCIBLE_SOURCE_DIR) + "/configs/clusters/dgx-h100.toml");
  ASSERT_TRUE(cluster) << cluster.status().message();
  ASSERT_FALSE(cluster->stack.graphs);  // the file describes eager launches
  cluster->stack.launch_s = 50e-6;      // launch-bound: the tiny model's kernels take less
  auto predict = [&](const std::vector<std::string>& sets, int world) {
    auto cfg = load_config("", sets);
    EXPECT_TRUE(cfg) << cfg.status().message();
    return run_prediction(*cfg, world, *cluster);
  };
  const auto graphed = predict({"run.device=cuda"}, 1);
  const auto launched = predict({"run.device=cuda", "run.cuda_graphs=false"}, 1);
  ASSERT_TRUE(graphed.contains("step_time_s")) << graphed.dump();
  ASSERT_TRUE(launched.contains("step_time_s")) << launched.dump();
  EXPECT_TRUE(graphed["cuda_graphs"].get<bool>());
  EXPECT_FALSE(launched["cuda_graphs"].get<bool>());
  // The default's 4 blocks launch 96 kernels a step at 50 us each (4.8 ms),
  // against one launch per direction: the eager step is longer by far more
  // than half a millisecond (its kernels are microseconds on an H100).
  EXPECT_LT(graphed["step_time_s"].get<double>() + 5e-4, launched["step_time_s"].get<double>());
  // Two ranks launch kernel by kernel, whatever run.cuda_graphs says.
  const auto two = predict({"run.device=cuda", "train.batch_size=4"}, 2);
  EXPECT_FALSE(two["cuda_graphs"].get<bool>());
}

}  // namespace
}  // namespace crucible::runtime
