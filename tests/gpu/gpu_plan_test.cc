// The planner closed on GPU runs (the platform issue): each run below
// predicts its own step on its GPU's section of the probe (measured by the
// first run, its own GEMM shapes and attention timed on the GPU:
// profile/local_probe.h) and stores it in RUN/plan.json before its first
// step. Held to what the issue asks on the lent GPU: the step time within
// 10% of the median measured step, the peak device memory within 5% of the
// allocator's. Every run prints its row, the benchmark's table of the
// planner's error (docs/plan.md). Without a GPU it skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/json_io.h"
#include "gpu/gpu_support.h"
#include "support/cli_runner.h"

namespace crucible::e2e {
namespace {

struct Case {
  const char* name;
  const char* config;  // configs/<config>.toml
  int ranks;
  std::vector<std::string> sets;
};

double median_step_ms(const std::string& metrics) {
  std::vector<double> v;
  for (const nlohmann::json& r : metric_rows(metrics))
    if (r.value("step", 0) > 3 && r.contains("step_ms")) v.push_back(r["step_ms"].get<double>());
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(GpuPlan, RunsPredictTheirStepAndMemoryOnTheGpu) {
  REQUIRE_GPU();
  TempDir dir("gpu_plan");
  ::setenv("CRUCIBLE_CACHE_DIR", (dir / "cache").c_str(), 1);  // measured by the first run, here
  const std::vector<std::string> gpt2_1024 = {"model.seq_len=1024", "train.batch_size=16",
                                              "train.grad_accum=1"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const std::vector<std::string> m350 = {"model.n_layer=24", "model.n_embd=1024",
                                         "model.n_head=16"};
  const std::vector<Case> cases = {
      {"tiny_fp32", "tiny", 1, {}},
      {"tiny_bf16", "tiny", 1, {"train.precision=bf16"}},
      {"gpt2_fp32", "gpt2-124M", 1, gpt2_1024},
      {"gpt2_bf16", "gpt2-124M", 1, with(gpt2_1024, {"train.precision=bf16"})},
      {"gpt2_bf16_full", "gpt2-124M", 1,
       with(gpt2_1024, {"train.precision=bf16", "train.recompute=full"})},
      {"gpt2_fp32_full", "gpt2-124M", 1, with(gpt2_1024, {"train.recompute=full"})},
      {"gpt2_bf16_fused_head", "gpt2-124M", 1,
       with(gpt2_1024, {"train.precision=bf16", "train.fused_head=true"})},
      {"gpt2_350M_bf16", "gpt2-124M", 1, with(with(gpt2_1024, m350), {"train.precision=bf16"})},
      {"tiny_dp2_shared", "tiny", 2, {"dist.share_gpus=true", "train.batch_size=4"}},
  };
  const std::vector<std::string> common = {
      "run.device=cuda", "train.steps=20",      "train.eval_every=0",
      "ckpt.every=0",    "run.sample_tokens=0", "data.cache_dir=" + std::string(dir / "data")};
  std::vector<std::string> missed;
  for (const Case& c : cases) {
    const std::string run = dir / c.name;
    std::vector<std::string> train = {
        std::string(CRUCIBLE_SOURCE_DIR) + "/configs/" + c.config + ".toml", "--run-dir", run};
    for (const auto* sets : {&common, &c.sets})
      for (const std::string& s : *sets) train.insert(train.end(), {"--set", s});
    auto r = run_crucible(train_command(c.ranks, train), dir.path());
    ASSERT_EQ(r.code, 0) << c.name << "\n" << r.output;
    auto plan = read_json(run + "/plan.json");
    ASSERT_TRUE(plan) << c.name;
    ASSERT_TRUE(plan->contains("step_time_s")) << c.name << ": " << plan->dump(1);
    const double predicted_ms = (*plan)["step_time_s"].get<double>() * 1e3;
    const std::string metrics = run + (c.ranks > 1 ? "/metrics.rank0.jsonl" : "/metrics.jsonl");
    const double measured_ms = median_step_ms(run + "/metrics.jsonl");
    uint64_t peak = 0;
    for (const auto& row : metric_rows(metrics))
      peak = std::max(peak, row.value("mem_peak", uint64_t(0)));
    const double predicted_mem = (*plan)["peak_memory_bytes"].get<double>();
    ASSERT_GT(measured_ms, 0) << c.name;
    ASSERT_GT(peak, 0u) << c.name;
    const double time_err = predicted_ms / measured_ms - 1,
                 mem_err = predicted_mem / double(peak) - 1;
    std::printf(
        "[gpu plan] %-22s predicted %8.2f ms, measured %8.2f ms (%+6.1f%%); memory %8.1f MiB "
        "predicted, "
        "%8.1f MiB measured (%+5.1f%%)\n",
        c.name, predicted_ms, measured_ms, 100 * time_err, predicted_mem / 1048576.0,
        double(peak) / 1048576.0, 100 * mem_err);
    if (std::fabs(time_err) > 0.10 || std::fabs(mem_err) > 0.05) missed.push_back(c.name);
  }
  ::unsetenv("CRUCIBLE_CACHE_DIR");
  std::string list;
  for (const std::string& m : missed) list += " " + m;
  EXPECT_TRUE(missed.empty()) << "outside 10% (time) or 5% (memory):" << list;
}

}  // namespace
}  // namespace crucible::e2e
