// The planner's memory model against crucible's allocator, on real training
// runs of DESIGN.md's two workloads (`crucible train` and `crucible launch
// -n N -- train`, real processes): for every layout below, each rank's
// predicted allocator peak (plan/memory_model.h) is within 5% of the peak
// its allocator measured (metrics.jsonl's mem_peak), and RUN/plan.json, the
// prediction the run stored before its first step, names the largest.
// These are deterministic: the model counts every buffer as the allocator
// rounds it; what it cannot count exactly (oneDNN's scratchpad) is an
// allowance of 4 MiB.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "runtime/config.h"
#include "runtime/memory_estimate.h"
#include "support/cli_runner.h"

namespace crucible::e2e {
namespace {

struct Case {
  const char* name;
  const char* config;  // configs/<config>.toml
  int ranks;
  std::vector<std::string> sets;
};

TEST(MemoryPrediction, WithinFivePercentOfTheAllocatorsPeakOnEveryRank) {
  TempDir dir("memory_prediction");
  const std::vector<Case> cases = {
      {"tiny_fp32", "tiny", 1, {}},
      {"tiny_bf16_selective", "tiny", 1, {"train.precision=bf16", "train.recompute=selective"}},
      {"tiny_bf16_full_accum", "tiny", 1,
       {"train.precision=bf16", "train.recompute=full", "train.batch_size=4", "train.grad_accum=2"}},
      {"gpt2_bf16", "gpt2-124M", 1, {"train.precision=bf16", "train.grad_accum=1"}},
      {"gpt2_fp32_full", "gpt2-124M", 1, {"train.recompute=full", "train.grad_accum=1"}},
      {"gpt2_bf16_full_fused_head", "gpt2-124M", 1,
       {"train.precision=bf16", "train.recompute=full", "train.fused_head=true", "train.grad_accum=1"}},
      {"tiny_dp2_zero1", "tiny", 2, {"dist.zero=1", "train.batch_size=4"}},
      {"tiny_dp2_zero2_bf16", "tiny", 2, {"dist.zero=2", "train.batch_size=4", "train.precision=bf16"}},
      {"tiny_dp2_grads_bf16", "tiny", 2, {"dist.grad_dtype=bf16", "train.batch_size=4", "train.precision=bf16"}},
      {"tiny_dp2_reproducible", "tiny", 2, {"dist.reproducible=true", "train.batch_size=2", "train.grad_accum=2"}},
      {"tiny_tp2_sp_bf16", "tiny", 2, {"dist.tp=2", "dist.sequence_parallel=true", "train.precision=bf16"}},
      {"tiny_tp2_fused_head", "tiny", 2, {"dist.tp=2", "train.fused_head=true"}},
      {"tiny_pp2_1f1b", "tiny", 2, {"dist.pp=2", "train.batch_size=2", "train.grad_accum=4"}},
      {"tiny_tp2_pp2", "tiny", 4, {"dist.tp=2", "dist.pp=2", "train.batch_size=2", "train.grad_accum=2"}},
  };
  const std::vector<std::string> common = {
      "train.steps=2",     "train.eval_every=0", "train.eval_batches=1", "ckpt.every=0",
      "run.sample_tokens=0", "data.cache_dir=" + std::string(dir / "data")};
  ::setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
  for (const Case& c : cases) {
    const std::string run = dir / c.name;
    std::vector<std::string> train = {std::string(CRUCIBLE_SOURCE_DIR) + "/configs/" + c.config + ".toml",
                                      "--run-dir", run};
    for (const auto* sets : {&common, &c.sets})
      for (const std::string& s : *sets) train.insert(train.end(), {"--set", s});
    auto r = run_crucible(train_command(c.ranks, train), dir.path());
    ASSERT_EQ(r.code, 0) << c.name << "\n" << r.output;
    auto resolved = runtime::load_config(run + "/config.toml");
    ASSERT_TRUE(resolved) << resolved.status().message();
    uint64_t largest_predicted = 0;
    for (int rank = 0; rank < c.ranks; ++rank) {
      const std::string file = c.ranks > 1 ? "/metrics.rank" + std::to_string(rank) + ".jsonl" : "/metrics.jsonl";
      uint64_t peak = 0;
      for (const auto& row : metric_rows(run + file)) peak = std::max(peak, row.value("mem_peak", uint64_t(0)));
      ASSERT_GT(peak, 0u) << c.name << " rank " << rank;
      const uint64_t predicted = runtime::estimate_memory(*resolved, c.ranks, rank).allocator_bytes();
      largest_predicted = std::max(largest_predicted, predicted);
      const double err = double(predicted) / double(peak) - 1;
      EXPECT_LE(std::fabs(err), 0.05) << c.name << " rank " << rank << ": predicted " << predicted
                                      << " B, the allocator's peak " << peak << " B";
      std::printf("[memory prediction] %-22s rank %d: predicted %8.2f MiB, measured %8.2f MiB (%+.2f%%)\n", c.name,
                  rank, predicted / 1048576.0, peak / 1048576.0, 100 * err);
    }
    const nlohmann::json plan = nlohmann::json::parse(read_file(run + "/plan.json"));
    // The stored prediction is of the rank needing the most (its checkpoint copy counted).
    const int peak_rank = plan.value("peak_rank", -1);
    ASSERT_GE(peak_rank, 0) << c.name;
    EXPECT_EQ(plan.value("peak_memory_bytes", uint64_t(0)),
              runtime::estimate_memory(*resolved, c.ranks, peak_rank).allocator_bytes())
        << c.name;
    EXPECT_GE(largest_predicted, plan.value("peak_memory_bytes", uint64_t(0))) << c.name;
    EXPECT_EQ(plan["layout"].value("devices", 0), c.ranks) << c.name;
  }
}

}  // namespace
}  // namespace crucible::e2e
