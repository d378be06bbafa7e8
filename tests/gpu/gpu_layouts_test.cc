// Several ranks on the lent machine's one GPU (docs/parallelism.md, "Ranks on
// GPUs"): `crucible launch -n N -- train --set run.device=cuda --set
// dist.share_gpus=true`, every collective staged through pinned host memory.
// Each layout of one global batch must train the one-rank GPU run: every
// step's loss within 1e-4 (fp32; the CPU's layout tests hold 1e-5 on the
// weights). Without a GPU it skips; without sharing, more ranks than GPUs is
// refused in one line.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gpu/gpu_support.h"
#include "support/cli_runner.h"

namespace crucible::e2e {
namespace {

std::vector<std::string> train_args(const std::string& run, std::vector<std::string> sets) {
  std::vector<std::string> a = {
      "--run-dir",           run,     "--set",           "train.steps=20", "--set",
      "run.sample_tokens=0", "--set", "run.device=cuda", "--set",          "model.n_layer=4"};
  for (const std::string& s : sets) a.insert(a.end(), {"--set", s});
  return a;
}

TEST(GpuLayouts, EveryLayoutOnOneGpuTrainsTheOneRankRun) {
  REQUIRE_GPU();
  TempDir dir("gpu_layouts");
  std::vector<std::string> one = {"train"};
  for (const std::string& a : train_args(dir / "one", {"train.grad_accum=2"})) one.push_back(a);
  auto base = run_crucible(one, dir.path());
  ASSERT_EQ(base.code, 0) << base.output;
  const auto want = step_losses(dir / "one");
  ASSERT_EQ(want.size(), 20u);
  struct Case {
    std::string name;
    int ranks;
    std::vector<std::string> sets;
    double tolerance = 1e-4;
  };
  const std::vector<Case> cases = {
      {"dp2", 2, {}},
      {"tp2", 2, {"dist.tp=2", "train.grad_accum=2"}},
      {"pp2_1f1b", 2, {"dist.pp=2", "train.grad_accum=2"}},
      {"pp2_zbh1", 2, {"dist.pp=2", "dist.pp_schedule=zb-h1", "train.grad_accum=2"}},
      {"pp2_interleaved",
       2,
       {"dist.pp=2", "dist.pp_schedule=interleaved", "dist.pp_virtual=2", "train.grad_accum=2"}},
      {"dp2tp2_zero1", 4, {"dist.tp=2", "dist.zero=1"}},
      // bf16 on the wire: each rank's gradients rounded once and their sum
      // once more (2^-8 relative each), summed on the GPU in rank order
      // (kernels::sum_bf16_pieces). Twenty steps of AdamW move the loss
      // by far less than 1e-2 for roundings of that size; a sum that lost or
      // doubled a rank's piece moves it by more.
      {"dp2_bf16_wire", 2, {"dist.grad_dtype=bf16"}, 1e-2},
      {"dp2_zero2_bf16_wire", 2, {"dist.grad_dtype=bf16", "dist.zero=2"}, 1e-2},
  };
  for (const Case& c : cases) {
    std::vector<std::string> sets = c.sets;
    sets.push_back("dist.share_gpus=true");
    auto r = run_crucible(launch_train(c.ranks, train_args(dir / c.name, sets)), dir.path());
    ASSERT_EQ(r.code, 0) << c.name << "\n" << r.output;
    EXPECT_NE(r.output.find("+staged"), std::string::npos)
        << c.name << ": ranks sharing a GPU stage\n"
        << r.output;
    const auto got = step_losses(dir / c.name);
    ASSERT_EQ(got.size(), want.size()) << c.name;
    for (const auto& [step, loss] : want)
      EXPECT_NEAR(got.at(step), loss, c.tolerance) << c.name << " step " << step;
  }
  // Without dist.share_gpus, two ranks on one GPU are refused before training.
  auto refused = run_crucible(launch_train(2, train_args(dir / "refused", {})), dir.path());
  EXPECT_EQ(refused.code, 2) << refused.output;
  EXPECT_NE(refused.output.find("dist.share_gpus = true"), std::string::npos) << refused.output;
}

}  // namespace
}  // namespace crucible::e2e
